/* libvigilio internals shared by the wrappers (wrap.c) and the core (core.c). */
#ifndef VIGILIO_H
#define VIGILIO_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/*
 * The library's own system calls. Where the library wraps syscall() (for
 * programs that call openat2 and close_range through it), its own calls and
 * the wrappers' fallbacks must not come back into the wrapper: they trap
 * directly. Elsewhere they are glibc's syscall().
 */
#include <errno.h>
#if defined(__x86_64__)
#define VIO_WRAP_SYSCALL 1
static inline long vio_raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}
#elif defined(__aarch64__)
#define VIO_WRAP_SYSCALL 1
static inline long vio_raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
	if (x0 < 0 && x0 > -4096) {
		errno = (int)-x0;
		return -1;
	}
	return x0;
}
#else
#include <unistd.h>
static inline long vio_raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	return syscall(n, a, b, c, d, e, f);
}
#endif
#define VIO_SYS(n, a, b, c) vio_raw_syscall((long)(n), (long)(a), (long)(b), (long)(c), 0, 0, 0)

#define VIO_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/*
 * Counter indexes in a thread's block. A read or write touches the first cache
 * line of its file's 5 lines and one histogram line; the reporter writes them
 * in the protocol's order (vio_proto_index in core.c).
 */
enum {
	C_READS, C_BYTES_READ, C_READ_NS, C_WRITES, C_BYTES_WRITTEN, C_WRITE_NS, C_SEQ, C_RANDOM,
	C_OPENS, C_CLOSES, C_META_NS, C_SEEKS, C_SYNCS, C_STATS, C_MMAPS, C_META_OTHER,
	C_RHIST, C_WHIST = C_RHIST + 10,
	NCOUNTERS = C_WHIST + 10,
	STRIDE = 40 /* counters per file in a block: 5 cache lines */
};

#define MAX_FILES 4096   /* file slots per process; slot 0 is "other files" */
#define MAX_FDS 65536    /* fds beyond this are counted in slot 0 */

/* What every wrapped call reads, in one cache line (fewer pages touched per call). */
struct vio_hot {
	int enabled;
	int use_tsc;
	uint32_t sample_every;
	int rep_started;
	int sock_fd;
} __attribute__((aligned(64)));
extern struct vio_hot vio_hot;
#define vio_enabled (vio_hot.enabled)
#define vio_use_tsc (vio_hot.use_tsc)
#define vio_sample_every (vio_hot.sample_every)
#define vio_rep_started (vio_hot.rep_started)
#define vio_sock_fd (vio_hot.sock_fd)

/* Per fd, one cache line's worth together: a call touches as few pages as possible. */
struct vio_fd {
	int64_t pos;   /* file position as seen by read/write/lseek */
	int64_t end;   /* end of the last access + 1; 0 = none yet */
	uint32_t slot; /* file slot + 1; 0 = the fd is not counted */
};
extern struct vio_fd vio_fds[MAX_FDS];

static inline int fd_slot(int fd)
{
	if ((unsigned)fd >= MAX_FDS)
		return -1;
	return (int)__atomic_load_n(&vio_fds[fd].slot, __ATOMIC_RELAXED) - 1;
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Call times are taken in ticks: the TSC where it is invariant (about 20 ns a
 * read here, against 50 ns for clock_gettime through the vDSO), else
 * CLOCK_MONOTONIC ns. The reporter converts the *_ns counters to ns.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t now_ticks(void)
{
	if (likely(vio_use_tsc))
		return __rdtsc();
	return now_ns();
}
#else
static inline uint64_t now_ticks(void)
{
	return now_ns();
}
#endif

/*
 * Call times are sampled: each thread times about one call in vio_sample_every
 * (at random intervals, so no access pattern aliases with it) and counts it
 * vio_sample_every times. 1 times every call.
 */
extern __thread uint32_t vio_countdown __attribute__((tls_model("initial-exec")));
uint32_t vio_next_countdown(void);

static inline int vio_sampled(void)
{
	if (likely(vio_countdown > 1)) {
		vio_countdown--;
		return 0;
	}
	vio_countdown = vio_next_countdown();
	return 1;
}

/* Accounting (core.c). slot < 0 means "not counted": the calls return at once. */
void vio_count(int slot, int idx, uint64_t n);
void vio_meta(int slot, int idx, uint64_t ns);
void vio_opened(int fd, const char *path, int dirfd, int flags, uint64_t ns);
void vio_closing(int fd, uint64_t ns);
void vio_close_range(unsigned first, unsigned last, int cloexec_only);
void vio_dup(int oldfd, int newfd);
void vio_seeked(int fd, int slot, off_t pos, uint64_t ns);
int vio_path_slot(int dirfd, const char *path);
void vio_mmap_add(void *addr, size_t len, int slot);
int vio_mmap_find(void *addr, int forget);
void vio_resolve(void);
void vio_before_exec(void);
void vio_exiting(void);
int vio_in_lib(void);

/* Hot path, inlined into the wrappers. */
extern __thread uint64_t *vio_tls_cur __attribute__((tls_model("initial-exec")));
extern __thread int vio_tls_atomic __attribute__((tls_model("initial-exec")));
uint64_t *vio_claim(void);
void vio_start_reporter(void);

static inline uint64_t *vio_counters(int slot)
{
	uint64_t *c = vio_tls_cur;
	if (unlikely(!__atomic_load_n(&vio_rep_started, __ATOMIC_RELAXED)))
		vio_start_reporter();
	if (unlikely(!c)) {
		c = vio_claim();
		if (!c)
			return NULL;
	}
	return c + (size_t)slot * STRIDE;
}

static inline void vio_add(uint64_t *c, int idx, uint64_t v)
{
	if (unlikely(vio_tls_atomic))
		__atomic_fetch_add(&c[idx], v, __ATOMIC_RELAXED);
	else
		__atomic_store_n(&c[idx], __atomic_load_n(&c[idx], __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

static inline int vio_bucket(uint64_t n)
{
	/* Darshan's access-size buckets: inclusive upper bounds, K = 1024. */
	if (n <= 100) return 0;
	if (n <= 1024) return 1;
	if (n <= 10240) return 2;
	if (n <= 102400) return 3;
	if (n <= 1048576) return 4;
	if (n <= 4194304) return 5;
	if (n <= 10485760) return 6;
	if (n <= 104857600) return 7;
	if (n <= 1073741824) return 8;
	return 9;
}

/* A read (write=0) or write of ret bytes at off (-1: at the fd's position). */
static inline void vio_io(int fd, int slot, int write, ssize_t ret, int64_t off, uint64_t ns)
{
	uint64_t *c;
	if (slot < 0 || !(c = vio_counters(slot)))
		return;
	vio_add(c, write ? C_WRITES : C_READS, 1);
	vio_add(c, write ? C_WRITE_NS : C_READ_NS, ns);
	if (ret < 0)
		return;
	if (ret > 0)
		vio_add(c, write ? C_BYTES_WRITTEN : C_BYTES_READ, (uint64_t)ret);
	vio_add(c, (write ? C_WHIST : C_RHIST) + vio_bucket((uint64_t)ret), 1);
	if ((unsigned)fd >= MAX_FDS)
		return;
	int64_t start = off >= 0 ? off : __atomic_load_n(&vio_fds[fd].pos, __ATOMIC_RELAXED);
	int64_t prev = __atomic_load_n(&vio_fds[fd].end, __ATOMIC_RELAXED);
	if (prev)
		vio_add(c, prev - 1 == start ? C_SEQ : C_RANDOM, 1);
	__atomic_store_n(&vio_fds[fd].end, start + ret + 1, __ATOMIC_RELAXED);
	if (off < 0)
		__atomic_store_n(&vio_fds[fd].pos, start + ret, __ATOMIC_RELAXED);
}

#endif
