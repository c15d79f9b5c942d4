/* Test programs run under LD_PRELOAD=libvigilio.so by lib_test.go: progs CMD ARGS. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
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

static int path_in(char *p, size_t cap, const char *dir, const char *name)
{
	snprintf(p, cap, "%s/%s", dir, name);
	return 0;
}

static int open_in(const char *dir, const char *name, int flags)
{
	char p[4200];
	path_in(p, sizeof p, dir, name);
	int fd = open(p, flags, 0644);
	if (fd < 0)
		die(name);
	return fd;
}

static int vfp(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

/* calls DIR: one use of each wrapped call Darshan does not wrap, and of the
 * rarer ones it does, each on its own file; lib_test.go TestCalls has the counts. */
static int calls(char **a)
{
	const char *d = a[0];
	char p[4200], q[4200];
	char buf[8192];
	memset(buf, 'v', sizeof buf);

	/* openat2 through syscall(): glibc 2.36 has no wrapper. */
	int dfd = open(d, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0, "open DIR");
	struct open_how how = { .flags = O_WRONLY | O_CREAT | O_TRUNC, .mode = 0644 };
	int fd = (int)syscall(SYS_openat2, dfd, "openat2", &how, sizeof how);
	CHECK(fd >= 0, "openat2");
	CHECK(write(fd, buf, 10) == 10, "write openat2");
	CHECK(close(fd) == 0, "close openat2");

	/* close_range drops the closed fds' state: the number, reused for
	 * another file, counts for that one; through glibc and through syscall(). */
	int fa = open_in(d, "cr_a", O_WRONLY | O_CREAT | O_TRUNC);
	CHECK(write(fa, buf, 5) == 5, "write cr_a");
	CHECK(close_range((unsigned)fa, (unsigned)fa, 0) == 0, "close_range");
	CHECK(write(fa, buf, 1) == -1 && errno == EBADF, "write after close_range");
	int fb = open_in(d, "cr_b", O_WRONLY | O_CREAT | O_TRUNC);
	CHECK(fb == fa, "fd number reused");
	CHECK(write(fb, buf, 7) == 7, "write cr_b");
	CHECK(syscall(SYS_close_range, fb, fb, 0) == 0, "syscall close_range");
	int fc = open_in(d, "cr_c", O_WRONLY | O_CREAT | O_TRUNC);
	CHECK(fc == fa, "fd number reused again");
	CHECK(write(fc, buf, 9) == 9, "write cr_c");
	CHECK(syscall(SYS_close, fc) == 0, "syscall close");
	int fd2 = open_in(d, "cr_d", O_WRONLY | O_CREAT | O_TRUNC);
	CHECK(write(fd2, buf, 11) == 11, "write cr_d");
	CHECK(close(fd2) == 0, "close cr_d");

	/* copy_file_range and sendfile: a read of the source, a write of the destination. */
	int src = open_in(d, "src", O_RDWR | O_CREAT | O_TRUNC);
	CHECK(write(src, buf, 4096) == 4096, "write src");
	int cfr = open_in(d, "cfr", O_WRONLY | O_CREAT | O_TRUNC);
	loff_t off_in = 0;
	CHECK(copy_file_range(src, &off_in, cfr, NULL, 4096, 0) == 4096, "copy_file_range");
	int sf = open_in(d, "sendfile", O_WRONLY | O_CREAT | O_TRUNC);
	off_t off = 1000;
	CHECK(sendfile(sf, src, &off, 3000) == 3000, "sendfile");
	CHECK(close(cfr) == 0 && close(sf) == 0 && close(src) == 0, "close copies");

	/* preadv2, pwritev2 */
	int v2 = open_in(d, "v2", O_RDWR | O_CREAT | O_TRUNC);
	struct iovec iov[2] = { { buf, 100 }, { buf + 100, 200 } };
	CHECK(pwritev2(v2, iov, 2, 0, 0) == 300, "pwritev2");
	CHECK(preadv2(v2, iov, 2, 0, 0) == 300, "preadv2");
	/* the stat family on one file: stat, lstat, fstat, fstatat (path and
	 * AT_EMPTY_PATH), statx (path and AT_EMPTY_PATH) */
	struct stat st;
	struct statx stx;
	path_in(p, sizeof p, d, "v2");
	CHECK(stat(p, &st) == 0 && lstat(p, &st) == 0 && fstat(v2, &st) == 0, "stat lstat fstat");
	CHECK(fstatat(dfd, "v2", &st, 0) == 0 && fstatat(v2, "", &st, AT_EMPTY_PATH) == 0, "fstatat");
	CHECK(statx(AT_FDCWD, p, 0, STATX_SIZE, &stx) == 0 && stx.stx_size == 300, "statx");
	CHECK(statx(v2, "", AT_EMPTY_PATH, STATX_SIZE, &stx) == 0, "statx empty path");
	/* dup3 and fcntl F_DUPFD*: the new fds write to the same file; F_GETFL is one more meta call */
	CHECK(dup3(v2, 200, O_CLOEXEC) == 200, "dup3");
	CHECK(write(200, buf, 1) == 1, "write dup3");
	int f1 = fcntl(v2, F_DUPFD, 300), f2 = fcntl(v2, F_DUPFD_CLOEXEC, 400);
	CHECK(f1 >= 300 && f2 >= 400, "fcntl F_DUPFD");
	CHECK(write(f1, buf, 2) == 2 && write(f2, buf, 3) == 3, "write F_DUPFD");
	CHECK(fcntl(v2, F_GETFL) >= 0, "fcntl F_GETFL");
	CHECK(close(200) == 0 && close(f1) == 0 && close(f2) == 0 && close(v2) == 0, "close v2");

	/* mmap, msync, munmap */
	int mf = open_in(d, "mmap", O_RDWR | O_CREAT | O_TRUNC);
	CHECK(ftruncate(mf, 8192) == 0, "ftruncate");
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, mf, 0);
	CHECK(m != MAP_FAILED, "mmap");
	memset(m, 1, 8192);
	CHECK(msync(m, 8192, MS_SYNC) == 0, "msync");
	CHECK(munmap(m, 8192) == 0, "munmap");
	CHECK(close(mf) == 0, "close mmap");

	/* rename counts on the old name, unlink on its path */
	int rf = open_in(d, "old", O_WRONLY | O_CREAT | O_TRUNC);
	CHECK(close(rf) == 0, "close old");
	path_in(p, sizeof p, d, "old");
	path_in(q, sizeof q, d, "new");
	CHECK(rename(p, q) == 0, "rename");
	CHECK(unlink(q) == 0, "unlink");

	/* stdio: fprintf, vfprintf, fputs; fgets; the fseek family and rewind */
	path_in(p, sizeof p, d, "stdio");
	FILE *f = fopen(p, "w+");
	CHECK(f != NULL, "fopen");
	CHECK(fprintf(f, "%d\n", 12345) == 6, "fprintf");
	CHECK(vfp(f, "%s\n", "abc") == 4, "vfprintf");
	CHECK(fputs("xy\n", f) >= 0, "fputs");
	CHECK(fseek(f, 0, SEEK_SET) == 0, "fseek");
	char line[64];
	CHECK(fgets(line, sizeof line, f) && strcmp(line, "12345\n") == 0, "fgets");
	CHECK(fseeko(f, 6, SEEK_SET) == 0 && fseeko64(f, 0, SEEK_END) == 0, "fseeko");
	fpos_t fp;
	fpos64_t fp64;
	CHECK(fgetpos(f, &fp) == 0 && fsetpos(f, &fp) == 0, "fsetpos");
	CHECK(fgetpos64(f, &fp64) == 0 && fsetpos64(f, &fp64) == 0, "fsetpos64");
	rewind(f);
	CHECK(fgets(line, sizeof line, f) && strcmp(line, "12345\n") == 0, "fgets after rewind");
	CHECK(fclose(f) == 0, "fclose");
	return close(dfd);
}

/* fexit A B: the parent writes 2×100 to A; a forked child 3×10 to A and
 * 4×10 to B and ends in _exit; a vforked child fails to exec and ends in
 * _exit; the parent writes 1×100 more to A and exits. */
static int fexit(char **a)
{
	int fa = open(a[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fa < 0)
		die("open A");
	put(fa, 2, 100);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		put(fa, 3, 10);
		int fb = open(a[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fb < 0)
			die("open B");
		put(fb, 4, 10);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("child");
	pid = vfork();
	if (pid < 0)
		die("vfork");
	if (pid == 0) {
		execl("/nonexistent/vigil", "x", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 127)
		die("vfork child");
	put(fa, 1, 100);
	return close(fa);
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int nargs; int (*fn)(char **); } cmds[] = {
		{ "threads", 3, threads }, { "fork", 2, forked }, { "exec", 2, execd }, { "errno", 1, errnos },
		{ "fold", 2, fold }, { "spin", 1, spin }, { "closeall", 2, closeall }, { "stdio", 1, stdio },
		{ "calls", 1, calls }, { "fexit", 2, fexit },
	};
	for (size_t i = 0; argc > 1 && i < sizeof cmds / sizeof *cmds; i++)
		if (strcmp(argv[1], cmds[i].name) == 0 && argc - 2 == cmds[i].nargs)
			return cmds[i].fn(argv + 2);
	fprintf(stderr, "usage: progs threads|fork|exec|errno|fold|spin|closeall|stdio|calls|fexit ARGS\n");
	return 2;
}
