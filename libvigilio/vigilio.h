/* libvigilio internals shared by the wrappers (wrap.c) and the core (core.c). */
#ifndef VIGILIO_H
#define VIGILIO_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#define VIO_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Counter indexes, in the order of the protocol's INTERVAL record. */
enum {
	C_OPENS, C_CLOSES, C_READS, C_WRITES, C_BYTES_READ, C_BYTES_WRITTEN,
	C_READ_NS, C_WRITE_NS, C_META_NS, C_SEEKS, C_SYNCS, C_STATS, C_MMAPS,
	C_META_OTHER, C_SEQ, C_RANDOM, C_RHIST, C_WHIST = C_RHIST + 10,
	NCOUNTERS = C_WHIST + 10
};

#define MAX_FILES 4096   /* file slots per process; slot 0 is "other files" */
#define MAX_FDS 65536    /* fds beyond this are counted in slot 0 */

/* fd_slot[fd] = slot+1 of a counted fd, 0 when the fd is not counted. */
extern uint16_t vio_fd_slot[MAX_FDS];
extern int vio_enabled;
extern int vio_sock_fd;

static inline int fd_slot(int fd)
{
	if ((unsigned)fd >= MAX_FDS)
		return -1;
	return (int)__atomic_load_n(&vio_fd_slot[fd], __ATOMIC_RELAXED) - 1;
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
extern int vio_use_tsc;
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
extern uint32_t vio_sample_every;
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
void vio_io(int fd, int slot, int write, ssize_t ret, int64_t off, uint64_t ns);
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
int vio_in_lib(void);

#endif
