/*
 * libvigilio core: the file table, per-thread counters and the reporter thread
 * that streams interval deltas to the node's sampler (docs/format/appio.md).
 *
 * Hot path: a wrapped call on a counted fd looks up vio_fds[fd].slot and adds
 * to the calling thread's own counter block (no lock, no syscall besides the
 * wrapped one, no allocation). Counters only grow; the reporter keeps a
 * snapshot per block and sends the differences.
 */
#include "vigilio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_BLOCKS 64          /* per-thread counter blocks; beyond, threads share one with atomics */
#define BLOCK_WORDS ((size_t)MAX_FILES * STRIDE)
#define BLOCK_BYTES (BLOCK_WORDS * sizeof(uint64_t))
#define ARENA_BYTES (1u << 20) /* path bytes of all files */
#define HASH_SIZE 8192         /* > 2 * MAX_FILES, so probing always ends */
#define MAX_PREFIXES 64
#define MAX_MAPS 256
#define MSG_MAX 65536
#define HDR 12
#define REC_BYTES (8 + NCOUNTERS * 8)
#define RETRY_NS 10000000000ull /* reconnect at most every 10 s */
#define SEND_BUDGET_MS 200     /* per flush, so a stuck sampler never holds the reporter long */
#define INLINE_BUDGET_MS 20    /* the same, when a program's own call flushes */

struct vio_fd vio_fds[MAX_FDS];
struct vio_hot vio_hot = { .sample_every = 4, .sock_fd = -1 };
__thread uint32_t vio_countdown __attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_rand __attribute__((tls_model("initial-exec")));
static uint64_t tsc0, mono0; /* a TSC reading and CLOCK_MONOTONIC taken together at start */


/* ---- configuration, read once in the constructor ---- */
static uint64_t interval_ns = 1000000000ull;
static char sock_path[108] = "/run/vigil/appio.sock";
static int32_t rank = -1;
static char exe_path[4097];
static char job_id[256];
static char prefix_buf[8192];
static struct prefix { const char *s; uint16_t len; uint8_t raw, include; } prefixes[MAX_PREFIXES];
static int nprefixes;

/* ---- counter blocks ---- */
enum { B_UNMAPPED, B_FREE, B_OWNED, B_MAPPING };
struct block {
	int state;
	uint64_t *cur;  /* written by the owning thread only (or atomically for the shared block) */
	uint64_t *snap; /* the reporter's view of cur at the last flush */
};
static struct block blocks[MAX_BLOCKS + 1]; /* [MAX_BLOCKS] is the shared one */
__thread uint64_t *vio_tls_cur __attribute__((tls_model("initial-exec")));
static __thread struct block *tls_blk __attribute__((tls_model("initial-exec")));
__thread int vio_tls_atomic __attribute__((tls_model("initial-exec")));
static __thread int tls_busy __attribute__((tls_model("initial-exec")));
static pthread_key_t blk_key;

/* ---- file table ---- */
static uint32_t nfiles = 1; /* slot 0 is "other files" */
static uint32_t path_off[MAX_FILES];
static uint16_t path_len[MAX_FILES];
static char arena[ARENA_BYTES];
static uint32_t arena_used;
static uint16_t htab[HASH_SIZE];
static int table_lock;
static uint64_t folds; /* files folded into slot 0 because the table was full */

static struct { uintptr_t addr; size_t len; int slot; } maps[MAX_MAPS];
static int nmaps;

/* ---- reporter ---- */
static pthread_mutex_t rep_mu = PTHREAD_MUTEX_INITIALIZER;
static int finished;
static int conn_fd = -1;
static ino_t conn_ino;
static int conn_dead;
static uint32_t conn_gen = 1;
static uint64_t last_try_ns;
static int ever_tried;
static uint32_t sent_gen[MAX_FILES];
static unsigned char msg[MSG_MAX];
static uint64_t delta[NCOUNTERS];

/* The protocol's counter order (docs/format/appio.md) as block indexes. */
static const unsigned char vio_proto_index[NCOUNTERS] = {
	C_OPENS, C_CLOSES, C_READS, C_WRITES, C_BYTES_READ, C_BYTES_WRITTEN, C_READ_NS, C_WRITE_NS,
	C_META_NS, C_SEEKS, C_SYNCS, C_STATS, C_MMAPS, C_META_OTHER, C_SEQ, C_RANDOM,
	C_RHIST, C_RHIST + 1, C_RHIST + 2, C_RHIST + 3, C_RHIST + 4, C_RHIST + 5, C_RHIST + 6, C_RHIST + 7,
	C_RHIST + 8, C_RHIST + 9, C_WHIST, C_WHIST + 1, C_WHIST + 2, C_WHIST + 3, C_WHIST + 4, C_WHIST + 5,
	C_WHIST + 6, C_WHIST + 7, C_WHIST + 8, C_WHIST + 9,
};
static uint64_t send_deadline_ns;
/*
 * A single-threaded program gets no reporter thread: a second thread makes
 * glibc take its multi-threaded paths (cancellation points, stdio locks) on
 * every call, about 50 ns a write here. Its wrapped calls flush instead, the
 * first after each interval boundary; the thread starts once the program
 * has threads of its own.
 */
static int inline_mode;
static uint64_t next_flush_ns;
/* The process the tables belong to: a vfork child shares them, and must not
 * flush or disconnect them at its exec or _exit (fork handlers do not run for it). */
static pid_t owner_pid;

static int vforked(void)
{
	return (pid_t)VIO_SYS(SYS_getpid, 0, 0, 0) != owner_pid;
}

static int spin_lock(int *l)
{
	for (int i = 0; i < 4096; i++) {
		if (!__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
			return 1;
		__builtin_ia32_pause();
	}
	return 0; /* contended or re-entered from a signal handler: caller falls back */
}

static void spin_unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}


static void release_block(void *p)
{
	struct block *b = p;
	vio_tls_cur = NULL;
	tls_blk = NULL;
	__atomic_store_n(&b->state, B_FREE, __ATOMIC_RELEASE);
}

static void *map_block(void)
{
	void *p = mmap(NULL, 2 * BLOCK_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The calling thread's counters: claims a block on first use. */
uint64_t *vio_claim(void)
{
	if (tls_busy) /* a signal handler interrupted the claim */
		goto shared;
	tls_busy = 1;
	for (int i = 0; i < MAX_BLOCKS; i++) {
		struct block *b = &blocks[i];
		int st = __atomic_load_n(&b->state, __ATOMIC_ACQUIRE);
		int exp = st;
		if (st != B_FREE && st != B_UNMAPPED)
			continue;
		if (!__atomic_compare_exchange_n(&b->state, &exp, st == B_FREE ? B_OWNED : B_MAPPING, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		if (st == B_UNMAPPED) {
			uint64_t *p = map_block();
			if (!p) {
				__atomic_store_n(&b->state, B_UNMAPPED, __ATOMIC_RELEASE);
				break;
			}
			b->snap = p + BLOCK_WORDS;
			__atomic_store_n(&b->cur, p, __ATOMIC_RELEASE);
			__atomic_store_n(&b->state, B_OWNED, __ATOMIC_RELEASE);
		}
		tls_blk = b;
		vio_tls_cur = b->cur;
		vio_tls_atomic = 0;
		pthread_setspecific(blk_key, b);
		tls_busy = 0;
		return vio_tls_cur;
	}
	tls_busy = 0;
shared: {
	struct block *b = &blocks[MAX_BLOCKS];
	uint64_t *c = __atomic_load_n(&b->cur, __ATOMIC_ACQUIRE);
	if (!c) {
		int exp = B_UNMAPPED;
		if (__atomic_compare_exchange_n(&b->state, &exp, B_MAPPING, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			uint64_t *p = map_block();
			if (p) {
				b->snap = p + BLOCK_WORDS;
				__atomic_store_n(&b->cur, p, __ATOMIC_RELEASE);
			}
			__atomic_store_n(&b->state, p ? B_OWNED : B_UNMAPPED, __ATOMIC_RELEASE);
			c = p;
		} else {
			/* Another thread is mapping it: wait for it (an mmap), rather
			 * than drop this call's counts. */
			for (long spins = 0; spins < 100000000L; spins++) {
				if ((c = __atomic_load_n(&b->cur, __ATOMIC_ACQUIRE)) != NULL ||
				    __atomic_load_n(&b->state, __ATOMIC_ACQUIRE) != B_MAPPING)
					break;
#if defined(__x86_64__) || defined(__i386__)
				__builtin_ia32_pause();
#endif
			}
			if (!c)
				c = __atomic_load_n(&b->cur, __ATOMIC_ACQUIRE);
		}
	}
	vio_tls_atomic = 1;
	if (c && !tls_busy)
		vio_tls_cur = c;
	return c;
}
}

void vio_count(int slot, int idx, uint64_t n)
{
	uint64_t *c;
	if (slot < 0 || !(c = vio_counters(slot)))
		return;
	vio_add(c, idx, n);
}

void vio_meta(int slot, int idx, uint64_t ns)
{
	uint64_t *c;
	if (slot < 0 || !(c = vio_counters(slot)))
		return;
	vio_add(c, idx, 1);
	vio_add(c, C_META_NS, ns);
}

void vio_seeked(int fd, int slot, off_t pos, uint64_t ns)
{
	vio_meta(slot, C_SEEKS, ns);
	if (pos >= 0 && (unsigned)fd < MAX_FDS)
		__atomic_store_n(&vio_fds[fd].pos, (int64_t)pos, __ATOMIC_RELAXED);
}

static void inline_tick(void);

/* Calls until the thread's next timed one: uniform in [1, 2N-1], mean N. */
uint32_t vio_next_countdown(void)
{
	if (unlikely(__atomic_load_n(&inline_mode, __ATOMIC_RELAXED)))
		inline_tick();
	if (vio_sample_every <= 1)
		return 1;
	uint32_t x = tls_rand;
	if (!x)
		x = (uint32_t)(uintptr_t)&x ^ (uint32_t)now_ns() ^ 0x9e3779b9u;
	x ^= x << 13; /* xorshift32 */
	x ^= x >> 17;
	x ^= x << 5;
	tls_rand = x ? x : 1;
	return 1 + x % (2 * vio_sample_every - 1);
}

/* ---- paths ---- */

static int prefix_match(const char *p, size_t n, const struct prefix *x)
{
	if (n < x->len || memcmp(p, x->s, x->len) != 0)
		return 0;
	return x->raw || n == x->len || p[x->len] == '/' || x->s[x->len - 1] == '/';
}

static int excluded(const char *p, size_t n)
{
	int ex = 0;
	for (int i = 0; i < nprefixes; i++) {
		if (!prefix_match(p, n, &prefixes[i]))
			continue;
		if (prefixes[i].include)
			return 0;
		ex = 1;
	}
	return ex;
}

/* Absolute form of path (relative to dirfd) in buf; its length, or -1. */
static int absolute(int dirfd, const char *path, char *buf, size_t cap)
{
	size_t pl = strnlen(path, cap);
	if (pl == 0 || pl >= cap)
		return -1;
	if (path[0] == '/') {
		memcpy(buf, path, pl + 1);
		return (int)pl;
	}
	size_t dl;
	if (dirfd == AT_FDCWD) {
		if (!getcwd(buf, cap))
			return -1;
		dl = strlen(buf);
	} else {
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
		ssize_t r = readlink(proc, buf, cap - 1);
		if (r <= 0)
			return -1;
		dl = (size_t)r;
	}
	while (pl >= 2 && path[0] == '.' && path[1] == '/') {
		path += 2;
		pl -= 2;
	}
	if (pl == 1 && path[0] == '.')
		pl = 0;
	if (dl + 1 + pl >= cap)
		return -1;
	if (dl > 1)
		buf[dl++] = '/';
	memcpy(buf + dl, path, pl);
	buf[dl + pl] = 0;
	return (int)(dl + pl);
}

static uint32_t hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 16777619u;
	return h;
}

static int lookup(const char *p, size_t n, uint32_t h)
{
	for (uint32_t i = h & (HASH_SIZE - 1);; i = (i + 1) & (HASH_SIZE - 1)) {
		uint16_t s = __atomic_load_n(&htab[i], __ATOMIC_ACQUIRE);
		if (!s)
			return -1;
		if (path_len[s] == n && memcmp(arena + path_off[s], p, n) == 0)
			return s;
	}
}

/* Slot of an absolute path, adding it to the table; 0 when the table is full. */
static int file_slot(const char *p, size_t n)
{
	uint32_t h = hash(p, n);
	int s = lookup(p, n, h);
	if (s >= 0)
		return s;
	if (!spin_lock(&table_lock))
		return 0;
	s = lookup(p, n, h);
	if (s < 0) {
		if (nfiles >= MAX_FILES || arena_used + n > ARENA_BYTES) {
			folds++;
			s = 0;
		} else {
			s = (int)nfiles;
			memcpy(arena + arena_used, p, n);
			path_off[s] = arena_used;
			path_len[s] = (uint16_t)n;
			arena_used += (uint32_t)n;
			uint32_t i = h & (HASH_SIZE - 1);
			while (htab[i])
				i = (i + 1) & (HASH_SIZE - 1);
			__atomic_store_n(&htab[i], (uint16_t)s, __ATOMIC_RELEASE);
			__atomic_store_n(&nfiles, nfiles + 1, __ATOMIC_RELEASE);
		}
	}
	spin_unlock(&table_lock);
	return s;
}

/* Slot for a path-based call (stat, rename, unlink): -1 when not counted. */
int vio_path_slot(int dirfd, const char *path)
{
	char buf[4097];
	if (!vio_enabled || !path)
		return -1;
	if (path[0] == '/') { /* the common case needs no copy */
		size_t n = strnlen(path, sizeof buf);
		if (n >= sizeof buf || excluded(path, n))
			return -1;
		return file_slot(path, n);
	}
	int n = absolute(dirfd, path, buf, sizeof buf);
	if (n < 0 || excluded(buf, (size_t)n))
		return -1;
	return file_slot(buf, (size_t)n);
}

void vio_opened(int fd, const char *path, int dirfd, int flags, uint64_t ns)
{
	if (fd < 0 || !vio_enabled || (flags & (O_DIRECTORY | O_PATH)))
		return;
	int s = vio_path_slot(dirfd, path);
	if (s < 0)
		return;
	if ((unsigned)fd < MAX_FDS) {
		__atomic_store_n(&vio_fds[fd].pos, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&vio_fds[fd].end, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&vio_fds[fd].slot, (uint32_t)(s + 1), __ATOMIC_RELAXED);
	} else {
		s = 0;
	}
	vio_meta(s, C_OPENS, ns);
}

void vio_closing(int fd, uint64_t ns)
{
	int s = fd_slot(fd);
	if (s < 0)
		return;
	__atomic_store_n(&vio_fds[fd].slot, 0, __ATOMIC_RELAXED);
	vio_meta(s, C_CLOSES, ns);
}

void vio_close_range(unsigned first, unsigned last, int cloexec_only)
{
	int sock = __atomic_load_n(&vio_sock_fd, __ATOMIC_RELAXED);
	if (!cloexec_only && sock >= 0 && (unsigned)sock >= first && (unsigned)sock <= last)
		__atomic_store_n(&conn_dead, 1, __ATOMIC_RELAXED);
	if (cloexec_only)
		return;
	if (last >= MAX_FDS)
		last = MAX_FDS - 1;
	for (unsigned fd = first; fd <= last; fd++)
		if (vio_fds[fd].slot)
			vio_closing((int)fd, 0);
}

void vio_dup(int oldfd, int newfd)
{
	if ((unsigned)newfd >= MAX_FDS || newfd == oldfd)
		return;
	if (newfd == __atomic_load_n(&vio_sock_fd, __ATOMIC_RELAXED))
		__atomic_store_n(&conn_dead, 1, __ATOMIC_RELAXED);
	if (vio_fds[newfd].slot)
		vio_closing(newfd, 0); /* dup2 closed it */
	int s = fd_slot(oldfd);
	if (s < 0)
		return;
	__atomic_store_n(&vio_fds[newfd].pos, __atomic_load_n(&vio_fds[oldfd].pos, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_store_n(&vio_fds[newfd].end, __atomic_load_n(&vio_fds[oldfd].end, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_store_n(&vio_fds[newfd].slot, (uint32_t)(s + 1), __ATOMIC_RELAXED);
}

void vio_mmap_add(void *addr, size_t len, int slot)
{
	if (!spin_lock(&table_lock))
		return;
	for (int i = 0; i < MAX_MAPS; i++) {
		if (maps[i].addr)
			continue;
		maps[i].addr = (uintptr_t)addr;
		maps[i].len = len;
		maps[i].slot = slot;
		__atomic_fetch_add(&nmaps, 1, __ATOMIC_RELAXED);
		break;
	}
	spin_unlock(&table_lock);
}

/* Slot of the mapping at addr (munmap, msync), or -1; forget removes it. */
int vio_mmap_find(void *addr, int forget)
{
	int s = -1;
	if (!__atomic_load_n(&nmaps, __ATOMIC_RELAXED) || !spin_lock(&table_lock))
		return -1;
	for (int i = 0; i < MAX_MAPS; i++) {
		uintptr_t a = maps[i].addr;
		if (a && (uintptr_t)addr >= a && (uintptr_t)addr < a + maps[i].len) {
			s = maps[i].slot;
			if (forget) {
				maps[i].addr = 0;
				__atomic_fetch_sub(&nmaps, 1, __ATOMIC_RELAXED);
			}
			break;
		}
	}
	spin_unlock(&table_lock);
	return s;
}

int vio_in_lib(void)
{
	return tls_busy;
}

/* ---- reporter ---- */

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }

static void header(unsigned char *p, uint16_t type, uint32_t len)
{
	memcpy(p, "VIO1", 4);
	put16(p + 4, 1);
	put16(p + 6, type);
	put32(p + 8, len);
}

static void drop_conn(void)
{
	/* Close only a socket that is still ours: the program may have reused the number. */
	struct stat st;
	if (conn_fd >= 0 && fstat(conn_fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == conn_ino)
		VIO_SYS(SYS_close, conn_fd, 0, 0);
	conn_fd = -1;
	__atomic_store_n(&vio_sock_fd, -1, __ATOMIC_RELAXED);
}

static int send_msg(const unsigned char *p, size_t n)
{
	if (conn_fd < 0)
		return -1;
	for (;;) {
		ssize_t r = send(conn_fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r == (ssize_t)n)
			return 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
			uint64_t now = now_ns();
			if (now < send_deadline_ns) {
				struct pollfd pfd = { .fd = conn_fd, .events = POLLOUT };
				poll(&pfd, 1, (int)((send_deadline_ns - now) / 1000000) + 1);
				continue;
			}
		}
		drop_conn();
		return -1;
	}
}

static size_t put_str(unsigned char *p, const char *s)
{
	size_t n = strlen(s); /* our own buffers, each < 4097 bytes */
	put16(p, (uint16_t)n);
	memcpy(p + 2, s, n);
	return 2 + n;
}

static void try_connect(void)
{
	uint64_t now = now_ns();
	if (ever_tried && now - last_try_ns < RETRY_NS)
		return;
	ever_tried = 1;
	last_try_ns = now;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	/* Keep low fd numbers for the program (it may expect open() to return 0 after close(0)). */
	struct rlimit rl;
	int floor = 1000;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur <= 1100)
		floor = (int)(rl.rlim_cur / 2);
	if (floor > 3) {
		int hi = (int)VIO_SYS(SYS_fcntl, fd, F_DUPFD_CLOEXEC, floor);
		if (hi >= 0) {
			VIO_SYS(SYS_close, fd, 0, 0);
			fd = hi;
		}
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock_path, sizeof sa.sun_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		VIO_SYS(SYS_close, fd, 0, 0);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		VIO_SYS(SYS_close, fd, 0, 0);
		return;
	}
	conn_fd = fd;
	conn_ino = st.st_ino;
	__atomic_store_n(&conn_dead, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&vio_sock_fd, fd, __ATOMIC_RELAXED);
	conn_gen++;
	unsigned char *p = msg + HDR;
	put32(p, (uint32_t)rank);
	put32(p + 4, (uint32_t)(interval_ns / 1000000));
	size_t n = 8;
	n += put_str(p + n, exe_path);
	n += put_str(p + n, job_id);
	n += put_str(p + n, "libvigilio 0.1");
	header(msg, 1, (uint32_t)n);
	send_msg(msg, HDR + n);
}

static void ensure_conn(void)
{
	if (conn_fd >= 0) {
		struct stat st;
		if (__atomic_load_n(&conn_dead, __ATOMIC_RELAXED) || fstat(conn_fd, &st) != 0 ||
		    !S_ISSOCK(st.st_mode) || st.st_ino != conn_ino) {
			conn_fd = -1; /* the program closed or replaced it: not ours to close */
			__atomic_store_n(&vio_sock_fd, -1, __ATOMIC_RELAXED);
			ever_tried = 0; /* reconnect now */
		}
	}
	if (conn_fd < 0)
		try_connect();
}

/* The raw deltas of the records in the INTERVAL message being built, so a
 * send that fails can give them back (unsend) and the next flush sends them:
 * a slow sampler delays counts, it does not lose them. */
#define MAX_MSG_RECS ((MSG_MAX - HDR - 20) / REC_BYTES + 1)
static uint64_t pend_raw[MAX_MSG_RECS][NCOUNTERS];
static uint32_t pend_slot[MAX_MSG_RECS];

/* Gives the deltas of slot s back: the snapshot of one mapped block moves
 * back by them, so the sum over blocks of cur - snap grows by raw again
 * (modulo 2^64, which the subtraction in collect undoes). */
static void unsend(uint32_t s, const uint64_t *raw)
{
	for (int b = 0; b <= MAX_BLOCKS; b++) {
		if (!__atomic_load_n(&blocks[b].cur, __ATOMIC_ACQUIRE))
			continue;
		uint64_t *sn = blocks[b].snap + (size_t)s * STRIDE;
		for (int k = 0; k < NCOUNTERS; k++)
			sn[k] -= raw[k];
		return;
	}
}

static void unsend_msg(uint32_t nrec)
{
	for (uint32_t i = 0; i < nrec; i++)
		unsend(pend_slot[i], pend_raw[i]);
}

/* Sums the deltas of slot s over all blocks into delta[]; 1 if any is non-zero. */
static int collect(uint32_t s)
{
	int any = 0;
	memset(delta, 0, sizeof delta);
	for (int b = 0; b <= MAX_BLOCKS; b++) {
		uint64_t *cur = __atomic_load_n(&blocks[b].cur, __ATOMIC_ACQUIRE);
		if (!cur)
			continue;
		uint64_t *c = cur + (size_t)s * STRIDE, *sn = blocks[b].snap + (size_t)s * STRIDE;
		for (int k = 0; k < NCOUNTERS; k++) {
			uint64_t v = __atomic_load_n(&c[k], __ATOMIC_RELAXED);
			if (v != sn[k]) { /* writes only what changed: untouched pages stay unmapped */
				delta[k] += v - sn[k];
				sn[k] = v;
				any = 1;
			}
		}
	}
	return any;
}

/* Sends the deltas since the last flush as the interval [start, end). Caller holds rep_mu. */
static void flush(uint64_t start, uint64_t end, int bye, uint64_t budget_ms)
{
	send_deadline_ns = now_ns() + budget_ms * 1000000ull;
	ensure_conn();
	uint32_t n = __atomic_load_n(&nfiles, __ATOMIC_ACQUIRE);
	size_t len = HDR + 20;
	uint32_t nrec = 0;
	unsigned char file[HDR + 14 + 4096];
	put64(msg + HDR, start);
	put64(msg + HDR + 8, end);
	double ns_per_tick = 1;
#if defined(__x86_64__) || defined(__i386__)
	if (vio_use_tsc) {
		uint64_t t = __rdtsc(), m = now_ns();
		if (t > tsc0 && m > mono0)
			ns_per_tick = (double)(m - mono0) / (double)(t - tsc0);
	}
#endif
	for (uint32_t s = 0; s < n; s++) {
		/* Not connected: the deltas stay in the counters until a flush
		 * that is (no memory grows: they are cur - snap). */
		if (conn_fd < 0 || !collect(s))
			continue;
		uint64_t raw[NCOUNTERS];
		memcpy(raw, delta, sizeof raw);
		delta[C_READ_NS] = (uint64_t)((double)delta[C_READ_NS] * ns_per_tick);
		delta[C_WRITE_NS] = (uint64_t)((double)delta[C_WRITE_NS] * ns_per_tick);
		delta[C_META_NS] = (uint64_t)((double)delta[C_META_NS] * ns_per_tick);
		if (s > 0 && sent_gen[s] != conn_gen) {
			put32(file + HDR, s);
			put32(file + HDR + 4, 0);
			put32(file + HDR + 8, 0);
			put16(file + HDR + 12, path_len[s]);
			memcpy(file + HDR + 14, arena + path_off[s], path_len[s]);
			size_t pl = 14 + (size_t)path_len[s];
			header(file, 2, (uint32_t)pl);
			if (send_msg(file, HDR + pl) != 0) {
				unsend(s, raw);
				continue;
			}
			sent_gen[s] = conn_gen;
		}
		if (len + REC_BYTES > MSG_MAX) { /* split: same start and end */
			put32(msg + HDR + 16, nrec);
			header(msg, 3, (uint32_t)(len - HDR));
			if (send_msg(msg, len) != 0) {
				unsend_msg(nrec);
				unsend(s, raw);
				nrec = 0;
				continue;
			}
			len = HDR + 20;
			nrec = 0;
		}
		pend_slot[nrec] = s;
		memcpy(pend_raw[nrec], raw, sizeof raw);
		unsigned char *r = msg + len;
		put32(r, s);
		put32(r + 4, 0);
		for (int k = 0; k < NCOUNTERS; k++)
			put64(r + 8 + 8 * k, delta[vio_proto_index[k]]);
		len += REC_BYTES;
		nrec++;
	}
	if (nrec > 0) {
		put32(msg + HDR + 16, nrec);
		header(msg, 3, (uint32_t)(len - HDR));
		if (send_msg(msg, len) != 0)
			unsend_msg(nrec);
	}
	if (bye && conn_fd >= 0) {
		header(msg, 4, 0);
		send_msg(msg, HDR);
	}
}

static void *reporter(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t now = wall_ns();
		uint64_t next = (now / interval_ns + 1) * interval_ns;
		struct timespec ts = { .tv_sec = (time_t)(next / 1000000000u), .tv_nsec = (long)(next % 1000000000u) };
		while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		pthread_mutex_lock(&rep_mu);
		if (__atomic_load_n(&finished, __ATOMIC_ACQUIRE)) {
			pthread_mutex_unlock(&rep_mu);
			return NULL;
		}
		flush(next - interval_ns, next, 0, SEND_BUDGET_MS);
		pthread_mutex_unlock(&rep_mu);
	}
}

static void create_reporter(void)
{
	/* The reporter takes no signals: the program's handlers run on its own threads. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 * 1024);
	pthread_t t;
	int err = pthread_create(&t, &at, reporter, NULL);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	(void)err; /* without a reporter the final flush at exit still sends */
}

void vio_start_reporter(void)
{
	int exp = 0;
	if (!vio_enabled || __atomic_load_n(&finished, __ATOMIC_RELAXED) ||
	    !__atomic_compare_exchange_n(&vio_rep_started, &exp, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	int e = errno;
	if (__libc_single_threaded) {
		next_flush_ns = (wall_ns() / interval_ns + 1) * interval_ns;
		__atomic_store_n(&inline_mode, 1, __ATOMIC_RELEASE);
	} else {
		create_reporter();
	}
	errno = e;
}

/* In a single-threaded program: flush if an interval ended, or hand over to a thread. */
static void inline_tick(void)
{
	int e = errno;
	if (!__libc_single_threaded) {
		__atomic_store_n(&inline_mode, 0, __ATOMIC_RELAXED);
		create_reporter();
		errno = e;
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts); /* a few ms late at worst, and cheap */
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (now < next_flush_ns || pthread_mutex_trylock(&rep_mu) != 0)
		return; /* trylock: a signal handler interrupting a flush skips */
	if (!__atomic_load_n(&finished, __ATOMIC_RELAXED) && now >= next_flush_ns) {
		/* Waits on a slow sampler at most INLINE_BUDGET_MS, once an interval. */
		flush(next_flush_ns - interval_ns, next_flush_ns, 0, INLINE_BUDGET_MS);
		next_flush_ns = (now / interval_ns + 1) * interval_ns;
	}
	pthread_mutex_unlock(&rep_mu);
	errno = e;
}

/* Before exec: the image's counts so far, then BYE (the new image reconnects). */
void vio_before_exec(void)
{
	if (!vio_enabled || !__atomic_load_n(&vio_rep_started, __ATOMIC_RELAXED) || vforked())
		return;
	int e = errno;
	pthread_mutex_lock(&rep_mu);
	if (!__atomic_load_n(&finished, __ATOMIC_RELAXED)) {
		uint64_t now = wall_ns();
		flush(now / interval_ns * interval_ns, now, 1, SEND_BUDGET_MS);
		drop_conn();
		ever_tried = 0; /* if exec fails, the next flush reconnects */
	}
	pthread_mutex_unlock(&rep_mu);
	errno = e;
}

/* ---- fork, constructor, destructor ---- */

static void atfork_child(void)
{
	/* The child starts with fresh counters and its own connection (its own SO_PEERCRED). */
	pthread_mutex_init(&rep_mu, NULL);
	table_lock = 0;
	owner_pid = (pid_t)VIO_SYS(SYS_getpid, 0, 0, 0);
	if (conn_fd >= 0)
		VIO_SYS(SYS_close, conn_fd, 0, 0);
	conn_fd = -1;
	__atomic_store_n(&vio_sock_fd, -1, __ATOMIC_RELAXED);
	ever_tried = 0;
	conn_gen++;
	inline_mode = 0;
	vio_rep_started = 0;
	for (int i = 0; i <= MAX_BLOCKS; i++) {
		struct block *b = &blocks[i];
		if (!b->cur)
			continue;
		mmap(b->cur, 2 * BLOCK_BYTES, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
		if (i < MAX_BLOCKS)
			b->state = (b == tls_blk) ? B_OWNED : B_FREE;
	}
}

static void add_prefixes(const char *list, int include, size_t *used)
{
	while (list && *list && nprefixes < MAX_PREFIXES) {
		const char *e = strchr(list, ':');
		size_t n = e ? (size_t)(e - list) : strlen(list);
		if (n > 0 && list[0] == '/' && *used + n + 1 <= sizeof prefix_buf) {
			struct prefix *x = &prefixes[nprefixes++];
			memcpy(prefix_buf + *used, list, n);
			x->raw = n > 1 && list[n - 1] == '*';
			if (x->raw)
				n--;
			prefix_buf[*used + n] = 0;
			x->s = prefix_buf + *used;
			x->len = (uint16_t)n;
			x->include = (uint8_t)include;
			*used += n + 1;
		}
		list = e ? e + 1 : NULL;
	}
}

/* The TSC counts time when its rate is constant and it runs in sleep states. */
static int invariant_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000000u), "c"(0));
	if (a < 0x80000007u)
		return 0;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000007u), "c"(0));
	return (d >> 8) & 1;
#else
	return 0;
#endif
}

__attribute__((constructor)) static void vio_init(void)
{
	vio_resolve();
	if (invariant_tsc()) {
		mono0 = now_ns();
		tsc0 = __rdtsc();
		vio_use_tsc = !getenv("VIGIL_IO_NO_TSC");
	}
	const char *v = getenv("VIGIL_IO_DISABLE");
	if (v && *v && strcmp(v, "0") != 0)
		return;
	if ((v = getenv("VIGIL_IO_INTERVAL_MS"))) {
		long ms = strtol(v, NULL, 10);
		if (ms >= 10 && ms <= 3600000)
			interval_ns = (uint64_t)ms * 1000000u;
	}
	if ((v = getenv("VIGIL_IO_TIME_SAMPLE"))) {
		long n = strtol(v, NULL, 10);
		if (n >= 1 && n <= 1000000)
			vio_sample_every = (uint32_t)n;
	}
	if ((v = getenv("VIGIL_APPIO_SOCKET")) && *v && strlen(v) < sizeof sock_path)
		snprintf(sock_path, sizeof sock_path, "%s", v);
	static const char *rank_vars[] = { "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID" };
	for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars; i++) {
		char *end;
		if ((v = getenv(rank_vars[i])) && *v) {
			long r = strtol(v, &end, 10);
			if (!*end && r >= 0 && r <= INT32_MAX) {
				rank = (int32_t)r;
				break;
			}
		}
	}
	if ((v = getenv("SLURM_JOB_ID")))
		snprintf(job_id, sizeof job_id, "%s", v);
	ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
	exe_path[n > 0 ? n : 0] = 0;
	size_t used = 0;
	add_prefixes("/proc:/sys:/dev:/etc:/usr:/lib*:/bin:/sbin:/run", 0, &used);
	add_prefixes(getenv("VIGIL_IO_EXCLUDE"), 0, &used);
	add_prefixes("/dev/shm", 1, &used);
	add_prefixes(getenv("VIGIL_IO_INCLUDE"), 1, &used);
	if (pthread_key_create(&blk_key, release_block) != 0)
		return;
	owner_pid = (pid_t)VIO_SYS(SYS_getpid, 0, 0, 0);
	pthread_atfork(NULL, NULL, atfork_child);
	vio_enabled = 1;
}

/* The final, partial interval and BYE, once. */
static void final_flush(void)
{
	if (!__atomic_load_n(&finished, __ATOMIC_RELAXED) && __atomic_load_n(&vio_rep_started, __ATOMIC_RELAXED)) {
		__atomic_store_n(&finished, 1, __ATOMIC_RELEASE);
		if (conn_fd < 0)
			ever_tried = 0; /* one more try for the last interval */
		uint64_t now = wall_ns();
		flush(now / interval_ns * interval_ns, now, 1, SEND_BUDGET_MS);
		drop_conn();
	}
	__atomic_store_n(&finished, 1, __ATOMIC_RELEASE);
}

__attribute__((destructor)) static void vio_fini(void)
{
	if (!vio_enabled)
		return;
	/* exit and return from main; _exit has its own wrapper, a signal skips both. */
	pthread_mutex_lock(&rep_mu);
	final_flush();
	pthread_mutex_unlock(&rep_mu);
}

/*
 * _exit and _Exit run no destructor: forked workers (fio's jobs, shells'
 * children) end this way, so their last interval is flushed here. The lock
 * is waited for a bounded time: a signal handler that calls _exit while its
 * own thread was flushing must not hang.
 */
void vio_exiting(void)
{
	if (!vio_enabled || !__atomic_load_n(&vio_rep_started, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&finished, __ATOMIC_RELAXED) || vforked())
		return;
	int e = errno;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += SEND_BUDGET_MS * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	if (pthread_mutex_timedlock(&rep_mu, &ts) == 0) {
		final_flush();
		pthread_mutex_unlock(&rep_mu);
	}
	errno = e;
}
