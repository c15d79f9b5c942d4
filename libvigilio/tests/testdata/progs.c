/* Test programs run under LD_PRELOAD=libvigilio.so by lib_test.go: progs CMD ARGS. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "progs: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void put(int fd, int n, int size)
{
	char buf[4096] = { 0 };
	for (int i = 0; i < n; i++)
		if (write(fd, buf, (size_t)size) != size)
			die("write");
}

static int fd_shared;
static int per_thread;

static void *writer(void *arg)
{
	(void)arg;
	put(fd_shared, per_thread, 100);
	return NULL;
}

/* threads FILE N M: N threads each write M × 100 bytes to FILE (O_APPEND). */
static int threads(char **a)
{
	int n = atoi(a[1]);
	per_thread = atoi(a[2]);
	fd_shared = open(a[0], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd_shared < 0)
		die("open");
	pthread_t t[256];
	for (int i = 0; i < n && i < 256; i++)
		if (pthread_create(&t[i], NULL, writer, NULL) != 0)
			die("pthread_create");
	for (int i = 0; i < n && i < 256; i++)
		pthread_join(t[i], NULL);
	return close(fd_shared);
}

/* fork A B: parent writes 10×100 to A, the child 3×10 to A and 7×50 to B, the parent 5×100 more. */
static int forked(char **a)
{
	int fa = open(a[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fa < 0)
		die("open A");
	put(fa, 10, 100);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		put(fa, 3, 10);
		int fb = open(a[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fb < 0)
			die("open B");
		put(fb, 7, 50);
		close(fb);
		exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("child");
	put(fa, 5, 100);
	return close(fa);
}

/* exec X Y: writes 4×100 to X, then execs dd writing 3 KiB to Y. */
static int execd(char **a)
{
	int fx = open(a[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fx < 0)
		die("open");
	put(fx, 4, 100);
	char of[4200];
	snprintf(of, sizeof of, "of=%s", a[1]);
	execl("/bin/dd", "dd", "if=/dev/zero", of, "bs=1k", "count=3", "status=none", (char *)NULL);
	die("execl");
	return 2;
}

#define CHECK(cond, what) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "progs errno: %s (errno %d)\n", what, errno); \
			return 1; \
		} \
	} while (0)

/* errno DIR: wrapped calls leave errno exactly as the real ones do. */
static int errnos(char **a)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/e", a[0]);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0, "open");
	errno = 4242;
	CHECK(write(fd, "abc", 3) == 3 && errno == 4242, "successful write changed errno");
	CHECK(lseek(fd, 0, 99) == -1 && errno == EINVAL, "lseek EINVAL");
	void *volatile bad = (void *)8; /* hidden from the compiler's bounds checks */
	CHECK(pwrite(fd, bad, 10, 0) == -1 && errno == EFAULT, "pwrite EFAULT");
	CHECK(write(9999, "x", 1) == -1 && errno == EBADF, "write EBADF");
	snprintf(p, sizeof p, "%s/missing/x", a[0]);
	CHECK(open(p, O_RDONLY) == -1 && errno == ENOENT, "open ENOENT");
	CHECK(fopen(p, "r") == NULL && errno == ENOENT, "fopen ENOENT");
	errno = 77;
	CHECK(fsync(fd) == 0 && errno == 77, "fsync changed errno");
	CHECK(close(fd) == 0 && errno == 77, "close changed errno");
	CHECK(close(fd) == -1 && errno == EBADF, "close EBADF");
	return 0;
}

/* fold DIR N: opens N files, writes 1 byte to each, closes it. */
static int fold(char **a)
{
	int n = atoi(a[1]);
	char p[4200];
	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof p, "%s/f%05d", a[0], i);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die("open");
		put(fd, 1, 1);
		close(fd);
	}
	return 0;
}

/* spin FILE: writes 1 byte every ms forever, after printing "ready". */
static int spin(char **a)
{
	int fd = open(a[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("open");
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		put(fd, 1, 1);
		sleep_ms(1);
	}
	return 0;
}

/* closeall A B: writes 2×10 to A, waits, 1×10 more (the library connects by then), closes
 * every fd from 3 up, writes 5×10 to B, waits, 1×10 more. */
static int closeall(char **a)
{
	int fa = open(a[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fa < 0)
		die("open A");
	put(fa, 2, 10);
	sleep_ms(400);
	put(fa, 1, 10);
	closefrom(3);
	int fb = open(a[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fb < 0)
		die("open B");
	put(fb, 5, 10);
	sleep_ms(400);
	put(fb, 1, 10);
	return close(fb);
}

/* stdio FILE: fopen, fwrite 3×1000, fprintf, fputs, fclose; fopen, fread, fgets, fseek, fclose. */
static int stdio(char **a)
{
	FILE *f = fopen(a[0], "w");
	if (!f)
		die("fopen");
	char buf[3000] = { 0 };
	for (int i = 0; i < 3; i++)
		if (fwrite(buf, 1, 1000, f) != 1000)
			die("fwrite");
	if (fprintf(f, "%s %d\n", "line", 42) != 8)
		die("fprintf");
	if (fputs("tail\n", f) < 0)
		die("fputs");
	if (fclose(f) != 0)
		die("fclose");
	f = fopen(a[0], "r");
	if (!f)
		die("fopen r");
	if (fread(buf, 1, 3000, f) != 3000)
		die("fread");
	char line[64];
	if (!fgets(line, sizeof line, f) || strcmp(line, "line 42\n") != 0)
		die("fgets");
	if (fseek(f, 0, SEEK_SET) != 0)
		die("fseek");
	return fclose(f);
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int nargs; int (*fn)(char **); } cmds[] = {
		{ "threads", 3, threads }, { "fork", 2, forked }, { "exec", 2, execd }, { "errno", 1, errnos },
		{ "fold", 2, fold }, { "spin", 1, spin }, { "closeall", 2, closeall }, { "stdio", 1, stdio },
	};
	for (size_t i = 0; argc > 1 && i < sizeof cmds / sizeof *cmds; i++)
		if (strcmp(argv[1], cmds[i].name) == 0 && argc - 2 == cmds[i].nargs)
			return cmds[i].fn(argv + 2);
	fprintf(stderr, "usage: progs threads|fork|exec|errno|fold|spin|closeall|stdio ARGS\n");
	return 2;
}
