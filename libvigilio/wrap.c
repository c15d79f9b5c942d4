/*
 * libvigilio wrappers: each resolves the next definition with dlsym(RTLD_NEXT)
 * (lazily, so a call before the constructor works), calls it, and counts the
 * call when its fd or path is counted. errno is preserved exactly.
 */
#include "vigilio.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Not declared by glibc's headers any more, still exported for old binaries. */
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstat(int, int, struct stat *);
int __fxstat64(int, int, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);
int __open_2(const char *, int);
int __open64_2(const char *, int);
int __openat_2(int, const char *, int);
ssize_t __read_chk(int, void *, size_t, size_t);
size_t __fread_chk(void *, size_t, size_t, size_t, FILE *);
char *__fgets_chk(char *, size_t, int, FILE *);
int __fprintf_chk(FILE *, int, const char *, ...);
int __vfprintf_chk(FILE *, int, const char *, va_list);
int fcntl64(int, int, ...);
int close_range(unsigned, unsigned, int);
void closefrom(int);

#ifdef VIO_WRAP_SYSCALL
#define REAL_SYSCALL(X) X(syscall)
#else
#define REAL_SYSCALL(X)
#endif

#define REALS(X) \
	REAL_SYSCALL(X) \
	X(open) X(open64) X(openat) X(openat64) X(creat) X(creat64) X(__open_2) X(__open64_2) X(__openat_2) \
	X(close) X(close_range) X(closefrom) X(read) X(write) X(__read_chk) X(pread) X(pread64) X(pwrite) \
	X(pwrite64) X(readv) X(writev) X(preadv) X(preadv64) X(pwritev) X(pwritev64) X(preadv2) X(pwritev2) \
	X(preadv64v2) X(pwritev64v2) X(lseek) X(lseek64) X(fsync) X(fdatasync) X(dup) X(dup2) X(dup3) \
	X(fcntl) X(fcntl64) X(mmap) X(mmap64) X(munmap) X(msync) X(rename) X(renameat) X(renameat2) \
	X(unlink) X(unlinkat) X(stat) X(stat64) X(lstat) X(lstat64) X(fstat) X(fstat64) X(fstatat) \
	X(fstatat64) X(statx) X(__xstat) X(__xstat64) X(__lxstat) X(__lxstat64) X(__fxstat) X(__fxstat64) \
	X(__fxstatat) X(__fxstatat64) X(copy_file_range) X(sendfile) X(sendfile64) \
	X(fopen) X(fopen64) X(fdopen) X(freopen) X(freopen64) X(fread) X(__fread_chk) X(fwrite) X(fgets) \
	X(__fgets_chk) X(fputs) X(vfprintf) X(__vfprintf_chk) X(fflush) X(fclose) X(fseek) X(fseeko) \
	X(fseeko64) X(fsetpos) X(fsetpos64) X(ftell) X(ftello) X(ftello64) X(rewind) \
	X(_exit) X(_Exit) X(execve) X(execv) X(execvp) X(execvpe) X(fexecve)

#define DECLARE(name) static __typeof__(name) *real_##name;
REALS(DECLARE)

static __thread int resolving __attribute__((tls_model("initial-exec")));

void vio_resolve(void)
{
	/* dlsym may allocate or open files: a wrapper called meanwhile falls back (NEED). */
	if (resolving)
		return;
	resolving = 1;
#define RESOLVE(name) \
	if (!__atomic_load_n(&real_##name, __ATOMIC_ACQUIRE)) \
		__atomic_store_n(&real_##name, (__typeof__(real_##name))dlsym(RTLD_NEXT, #name), __ATOMIC_RELEASE);
	REALS(RESOLVE)
	resolving = 0;
}

/* Ensures real_name, else returns fallback (a raw syscall where there is one). */
#define NEED(name, fallback) \
	do { \
		if (unlikely(!real_##name)) { \
			vio_resolve(); \
			if (!real_##name) \
				return fallback; \
		} \
	} while (0)
#define ENOSYS_INT (errno = ENOSYS, -1)
#define ENOSYS_PTR (errno = ENOSYS, NULL)

/* Times expr, a call on a counted fd or path, keeping its errno. */
#define TIMED(type, r, expr) \
	int timed_ = vio_sampled(); \
	uint64_t t0_ = timed_ ? now_ticks() : 0; \
	type r = expr; \
	int e_ = errno; \
	uint64_t dt_ = timed_ ? (now_ticks() - t0_) * vio_sample_every : 0

static int stream_fd(FILE *f)
{
	return f ? fileno(f) : -1;
}

/* ---- open ---- */

static int open_any(int dirfd, const char *path, int flags, mode_t mode, __typeof__(openat) *fn)
{
	if (!vio_enabled)
		return fn(dirfd, path, flags, mode);
	TIMED(int, fd, fn(dirfd, path, flags, mode));
	vio_opened(fd, path, dirfd, flags, dt_);
	errno = e_;
	return fd;
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

static int openat_sys(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	return (int)vio_raw_syscall(SYS_openat, dirfd, (long)path, flags, mode, 0, 0);
}

static int open_fn(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	(void)dirfd;
	return real_open(path, flags, mode);
}

static int open64_fn(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	(void)dirfd;
	return real_open64(path, flags, mode);
}

VIO_EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	NEED(open, openat_sys(AT_FDCWD, path, flags, mode));
	return open_any(AT_FDCWD, path, flags, mode, open_fn);
}

VIO_EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	NEED(open64, openat_sys(AT_FDCWD, path, flags, mode));
	return open_any(AT_FDCWD, path, flags, mode, open64_fn);
}

VIO_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	NEED(openat, openat_sys(dirfd, path, flags, mode));
	return open_any(dirfd, path, flags, mode, real_openat);
}

VIO_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	NEED(openat64, openat_sys(dirfd, path, flags, mode));
	return open_any(dirfd, path, flags, mode, real_openat64);
}

VIO_EXPORT int creat(const char *path, mode_t mode)
{
	return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

VIO_EXPORT int creat64(const char *path, mode_t mode)
{
	return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

VIO_EXPORT int __open_2(const char *path, int flags)
{
	return open(path, flags);
}

VIO_EXPORT int __open64_2(const char *path, int flags)
{
	return open64(path, flags);
}

VIO_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	return openat(dirfd, path, flags);
}

/* ---- close ---- */

VIO_EXPORT int close(int fd)
{
	NEED(close, (int)VIO_SYS(SYS_close, fd, 0, 0));
	if (unlikely(fd == vio_sock_fd && fd >= 0))
		vio_close_range((unsigned)fd, (unsigned)fd, 0);
	int s = fd_slot(fd);
	if (s < 0)
		return real_close(fd);
	__atomic_store_n(&vio_fds[fd].slot, 0, __ATOMIC_RELAXED); /* before: the number may be reused at once */
	TIMED(int, r, real_close(fd));
	vio_meta(s, C_CLOSES, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	NEED(close_range, (int)VIO_SYS(SYS_close_range, first, last, flags));
	int e = errno;
	if (vio_enabled && first <= last)
		vio_close_range(first, last, (flags & CLOSE_RANGE_CLOEXEC) != 0);
	errno = e;
	return real_close_range(first, last, flags);
}

VIO_EXPORT void closefrom(int lowfd)
{
	NEED(closefrom, (void)0);
	int e = errno;
	if (vio_enabled && lowfd >= 0)
		vio_close_range((unsigned)lowfd, ~0u, 0);
	errno = e;
	real_closefrom(lowfd);
}

/* ---- syscall(): openat2 has no glibc wrapper, so programs call it this way ---- */

#ifdef VIO_WRAP_SYSCALL
VIO_EXPORT long syscall(long n, ...)
{
	/* Six argument words, as the kernel takes: extra ones are never used. */
	va_list ap;
	va_start(ap, n);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	NEED(syscall, vio_raw_syscall(n, a, b, c, d, e, f));
	if (likely(!vio_enabled))
		return real_syscall(n, a, b, c, d, e, f);
	switch (n) {
	case SYS_openat2: {
		/* openat2(dirfd, path, how, size) */
		const struct open_how *how = (const struct open_how *)c;
		TIMED(long, r, real_syscall(n, a, b, c, d, e, f));
		/* The kernel read how; r >= 0 means it was valid memory. */
		if (r >= 0 && how && (size_t)d >= sizeof how->flags)
			vio_opened((int)r, (const char *)b, (int)a, (int)how->flags, dt_);
		errno = e_;
		return r;
	}
	case SYS_close:
		return close((int)a);
	case SYS_close_range:
		return close_range((unsigned)a, (unsigned)b, (int)c);
	}
	return real_syscall(n, a, b, c, d, e, f);
}
#endif

/* ---- read and write ---- */

#define IO_WRAP(ret, name, params, args, fdexpr, is_write, offexpr, fallback) \
	VIO_EXPORT ret name params \
	{ \
		NEED(name, fallback); \
		int fd_ = (fdexpr); \
		int s = fd_slot(fd_); \
		if (s < 0) \
			return real_##name args; \
		int64_t off_ = (offexpr); \
		TIMED(ret, r, real_##name args); \
		vio_io(fd_, s, is_write, (ssize_t)r, off_, dt_); \
		errno = e_; \
		return r; \
	}

IO_WRAP(ssize_t, read, (int fd, void *buf, size_t n), (fd, buf, n), fd, 0, -1, VIO_SYS(SYS_read, fd, buf, n))
IO_WRAP(ssize_t, write, (int fd, const void *buf, size_t n), (fd, buf, n), fd, 1, -1,
	VIO_SYS(SYS_write, fd, buf, n))
IO_WRAP(ssize_t, __read_chk, (int fd, void *buf, size_t n, size_t cap), (fd, buf, n, cap), fd, 0, -1, ENOSYS_INT)
IO_WRAP(ssize_t, pread, (int fd, void *buf, size_t n, off_t o), (fd, buf, n, o), fd, 0, o, ENOSYS_INT)
IO_WRAP(ssize_t, pread64, (int fd, void *buf, size_t n, off64_t o), (fd, buf, n, o), fd, 0, o, ENOSYS_INT)
IO_WRAP(ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t o), (fd, buf, n, o), fd, 1, o, ENOSYS_INT)
IO_WRAP(ssize_t, pwrite64, (int fd, const void *buf, size_t n, off64_t o), (fd, buf, n, o), fd, 1, o, ENOSYS_INT)
IO_WRAP(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n), fd, 0, -1, ENOSYS_INT)
IO_WRAP(ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n), fd, 1, -1, ENOSYS_INT)
IO_WRAP(ssize_t, preadv, (int fd, const struct iovec *v, int n, off_t o), (fd, v, n, o), fd, 0, o, ENOSYS_INT)
IO_WRAP(ssize_t, preadv64, (int fd, const struct iovec *v, int n, off64_t o), (fd, v, n, o), fd, 0, o, ENOSYS_INT)
IO_WRAP(ssize_t, pwritev, (int fd, const struct iovec *v, int n, off_t o), (fd, v, n, o), fd, 1, o, ENOSYS_INT)
IO_WRAP(ssize_t, pwritev64, (int fd, const struct iovec *v, int n, off64_t o), (fd, v, n, o), fd, 1, o,
	ENOSYS_INT)
IO_WRAP(ssize_t, preadv2, (int fd, const struct iovec *v, int n, off_t o, int fl), (fd, v, n, o, fl), fd, 0, o,
	ENOSYS_INT)
IO_WRAP(ssize_t, pwritev2, (int fd, const struct iovec *v, int n, off_t o, int fl), (fd, v, n, o, fl), fd, 1, o,
	ENOSYS_INT)
IO_WRAP(ssize_t, preadv64v2, (int fd, const struct iovec *v, int n, off64_t o, int fl), (fd, v, n, o, fl), fd, 0,
	o, ENOSYS_INT)
IO_WRAP(ssize_t, pwritev64v2, (int fd, const struct iovec *v, int n, off64_t o, int fl), (fd, v, n, o, fl), fd,
	1, o, ENOSYS_INT)

/* copy_file_range and sendfile: a read of the source and a write of the destination. */
static void copied(int in, int64_t in_off, int out, int64_t out_off, ssize_t r, uint64_t ns)
{
	vio_io(in, fd_slot(in), 0, r, in_off, ns / 2);
	vio_io(out, fd_slot(out), 1, r, out_off, ns - ns / 2);
}

VIO_EXPORT ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off, size_t n, unsigned fl)
{
	NEED(copy_file_range, ENOSYS_INT);
	if (fd_slot(in) < 0 && fd_slot(out) < 0)
		return real_copy_file_range(in, in_off, out, out_off, n, fl);
	int64_t io = in_off ? *in_off : -1, oo = out_off ? *out_off : -1;
	TIMED(ssize_t, r, real_copy_file_range(in, in_off, out, out_off, n, fl));
	copied(in, io, out, oo, r, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	NEED(sendfile, ENOSYS_INT);
	if (fd_slot(in) < 0 && fd_slot(out) < 0)
		return real_sendfile(out, in, off, n);
	int64_t io = off ? *off : -1;
	TIMED(ssize_t, r, real_sendfile(out, in, off, n));
	copied(in, io, out, -1, r, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	NEED(sendfile64, ENOSYS_INT);
	if (fd_slot(in) < 0 && fd_slot(out) < 0)
		return real_sendfile64(out, in, off, n);
	int64_t io = off ? *off : -1;
	TIMED(ssize_t, r, real_sendfile64(out, in, off, n));
	copied(in, io, out, -1, r, dt_);
	errno = e_;
	return r;
}

/* ---- seek, sync ---- */

#define SEEK_WRAP(name, type) \
	VIO_EXPORT type name(int fd, type off, int whence) \
	{ \
		NEED(name, ENOSYS_INT); \
		int s = fd_slot(fd); \
		if (s < 0) \
			return real_##name(fd, off, whence); \
		TIMED(type, r, real_##name(fd, off, whence)); \
		vio_seeked(fd, s, (off_t)r, dt_); \
		errno = e_; \
		return r; \
	}
SEEK_WRAP(lseek, off_t)
SEEK_WRAP(lseek64, off64_t)

/* A call on a counted fd that adds one to counter idx and its time to meta_ns. */
#define META_FD_WRAP(ret, name, params, args, fd, idx, fallback) \
	VIO_EXPORT ret name params \
	{ \
		NEED(name, fallback); \
		int s = fd_slot(fd); \
		if (s < 0) \
			return real_##name args; \
		TIMED(ret, r, real_##name args); \
		vio_meta(s, idx, dt_); \
		errno = e_; \
		return r; \
	}
META_FD_WRAP(int, fsync, (int fd), (fd), fd, C_SYNCS, ENOSYS_INT)
META_FD_WRAP(int, fdatasync, (int fd), (fd), fd, C_SYNCS, ENOSYS_INT)
META_FD_WRAP(int, fstat, (int fd, struct stat *st), (fd, st), fd, C_STATS, ENOSYS_INT)
META_FD_WRAP(int, fstat64, (int fd, struct stat64 *st), (fd, st), fd, C_STATS, ENOSYS_INT)
META_FD_WRAP(int, __fxstat, (int v, int fd, struct stat *st), (v, fd, st), fd, C_STATS, ENOSYS_INT)
META_FD_WRAP(int, __fxstat64, (int v, int fd, struct stat64 *st), (v, fd, st), fd, C_STATS, ENOSYS_INT)

/* ---- dup, fcntl ---- */

#define DUP_WRAP(name, params, args, oldfd, newexpr) \
	VIO_EXPORT int name params \
	{ \
		NEED(name, ENOSYS_INT); \
		int s = fd_slot(oldfd); \
		int target_ = (newexpr); \
		if (s < 0 && (target_ < 0 || !vio_enabled)) \
			return real_##name args; \
		TIMED(int, r, real_##name args); \
		if (r >= 0) \
			vio_dup(oldfd, r); \
		vio_meta(s, C_META_OTHER, dt_); \
		errno = e_; \
		return r; \
	}
DUP_WRAP(dup, (int fd), (fd), fd, -1)
DUP_WRAP(dup2, (int fd, int nfd), (fd, nfd), fd, nfd)
DUP_WRAP(dup3, (int fd, int nfd, int fl), (fd, nfd, fl), fd, nfd)

static int fcntl_any(__typeof__(fcntl) *fn, int fd, int cmd, void *arg)
{
	int s = fd_slot(fd);
	if (s < 0)
		return fn(fd, cmd, arg);
	TIMED(int, r, fn(fd, cmd, arg));
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		vio_dup(fd, r);
	vio_meta(s, C_META_OTHER, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *); /* int or pointer: the same register either way */
	va_end(ap);
	NEED(fcntl, (int)VIO_SYS(SYS_fcntl, fd, cmd, arg));
	return fcntl_any(real_fcntl, fd, cmd, arg);
}

VIO_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	NEED(fcntl64, (int)VIO_SYS(SYS_fcntl, fd, cmd, arg));
	return fcntl_any(real_fcntl64, fd, cmd, arg);
}

/* ---- mmap ---- */

#define MMAP_WRAP(name, offt) \
	VIO_EXPORT void *name(void *addr, size_t len, int prot, int flags, int fd, offt off) \
	{ \
		NEED(name, ENOSYS_PTR); \
		int s = (flags & MAP_ANONYMOUS) ? -1 : fd_slot(fd); \
		if (s < 0) \
			return real_##name(addr, len, prot, flags, fd, off); \
		TIMED(void *, r, real_##name(addr, len, prot, flags, fd, off)); \
		vio_meta(s, C_MMAPS, dt_); \
		if (r != MAP_FAILED) \
			vio_mmap_add(r, len, s); \
		errno = e_; \
		return r; \
	}
MMAP_WRAP(mmap, off_t)
MMAP_WRAP(mmap64, off64_t)

VIO_EXPORT int munmap(void *addr, size_t len)
{
	NEED(munmap, (int)VIO_SYS(SYS_munmap, addr, len, 0));
	int s = vio_mmap_find(addr, 1);
	if (s < 0)
		return real_munmap(addr, len);
	TIMED(int, r, real_munmap(addr, len));
	vio_meta(s, C_META_OTHER, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT int msync(void *addr, size_t len, int flags)
{
	NEED(msync, ENOSYS_INT);
	int s = vio_mmap_find(addr, 0);
	if (s < 0)
		return real_msync(addr, len, flags);
	TIMED(int, r, real_msync(addr, len, flags));
	vio_meta(s, C_META_OTHER, dt_);
	errno = e_;
	return r;
}

/* ---- path calls: counted when they succeed on a path that is not excluded ---- */

#define PATH_WRAP(ret, name, params, args, dirfd, path, idx) \
	VIO_EXPORT ret name params \
	{ \
		NEED(name, ENOSYS_INT); \
		if (!vio_enabled) \
			return real_##name args; \
		TIMED(ret, r, real_##name args); \
		if (r == 0) \
			vio_meta(vio_path_slot(dirfd, path), idx, dt_); \
		errno = e_; \
		return r; \
	}
PATH_WRAP(int, rename, (const char *a, const char *b), (a, b), AT_FDCWD, a, C_META_OTHER)
PATH_WRAP(int, renameat, (int da, const char *a, int db, const char *b), (da, a, db, b), da, a, C_META_OTHER)
PATH_WRAP(int, renameat2, (int da, const char *a, int db, const char *b, unsigned fl), (da, a, db, b, fl), da, a,
	  C_META_OTHER)
PATH_WRAP(int, unlink, (const char *p), (p), AT_FDCWD, p, C_META_OTHER)
PATH_WRAP(int, unlinkat, (int d, const char *p, int fl), (d, p, fl), d, p, C_META_OTHER)
PATH_WRAP(int, stat, (const char *p, struct stat *st), (p, st), AT_FDCWD, p, C_STATS)
PATH_WRAP(int, stat64, (const char *p, struct stat64 *st), (p, st), AT_FDCWD, p, C_STATS)
PATH_WRAP(int, lstat, (const char *p, struct stat *st), (p, st), AT_FDCWD, p, C_STATS)
PATH_WRAP(int, lstat64, (const char *p, struct stat64 *st), (p, st), AT_FDCWD, p, C_STATS)
PATH_WRAP(int, __xstat, (int v, const char *p, struct stat *st), (v, p, st), AT_FDCWD, p, C_STATS)
PATH_WRAP(int, __xstat64, (int v, const char *p, struct stat64 *st), (v, p, st), AT_FDCWD, p, C_STATS)
PATH_WRAP(int, __lxstat, (int v, const char *p, struct stat *st), (v, p, st), AT_FDCWD, p, C_STATS)
PATH_WRAP(int, __lxstat64, (int v, const char *p, struct stat64 *st), (v, p, st), AT_FDCWD, p, C_STATS)

/* fstatat and statx: with AT_EMPTY_PATH and "" they stat dirfd itself. */
static int at_slot(int dirfd, const char *path, int flags)
{
	if ((flags & AT_EMPTY_PATH) && path && !path[0])
		return fd_slot(dirfd);
	return vio_path_slot(dirfd, path);
}

#define AT_WRAP(name, params, args, dirfd, path, flags) \
	VIO_EXPORT int name params \
	{ \
		NEED(name, ENOSYS_INT); \
		if (!vio_enabled) \
			return real_##name args; \
		TIMED(int, r, real_##name args); \
		if (r == 0) \
			vio_meta(at_slot(dirfd, path, flags), C_STATS, dt_); \
		errno = e_; \
		return r; \
	}
AT_WRAP(fstatat, (int d, const char *p, struct stat *st, int fl), (d, p, st, fl), d, p, fl)
AT_WRAP(fstatat64, (int d, const char *p, struct stat64 *st, int fl), (d, p, st, fl), d, p, fl)
AT_WRAP(__fxstatat, (int v, int d, const char *p, struct stat *st, int fl), (v, d, p, st, fl), d, p, fl)
AT_WRAP(__fxstatat64, (int v, int d, const char *p, struct stat64 *st, int fl), (v, d, p, st, fl), d, p, fl)
AT_WRAP(statx, (int d, const char *p, int fl, unsigned m, struct statx *st), (d, p, fl, m, st), d, p, fl)

/* ---- stdio: counted on the stream's fd, as calls of the bytes asked and returned ---- */

static FILE *fopen_any(__typeof__(fopen) *fn, const char *path, const char *mode)
{
	if (!vio_enabled)
		return fn(path, mode);
	TIMED(FILE *, f, fn(path, mode));
	if (f)
		vio_opened(fileno(f), path, AT_FDCWD, 0, dt_);
	errno = e_;
	return f;
}

VIO_EXPORT FILE *fopen(const char *path, const char *mode)
{
	NEED(fopen, ENOSYS_PTR);
	return fopen_any(real_fopen, path, mode);
}

VIO_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	NEED(fopen64, ENOSYS_PTR);
	return fopen_any(real_fopen64, path, mode);
}

VIO_EXPORT FILE *fdopen(int fd, const char *mode)
{
	NEED(fdopen, ENOSYS_PTR);
	return real_fdopen(fd, mode); /* the fd keeps its file */
}

static FILE *freopen_any(__typeof__(freopen) *fn, const char *path, const char *mode, FILE *old)
{
	int ofd = stream_fd(old);
	int s = fd_slot(ofd);
	if (!vio_enabled || (s < 0 && !path))
		return fn(path, mode, old);
	if (s >= 0 && path)
		__atomic_store_n(&vio_fds[ofd].slot, 0, __ATOMIC_RELAXED);
	TIMED(FILE *, f, fn(path, mode, old));
	if (s >= 0 && path)
		vio_meta(s, C_CLOSES, 0);
	if (f && path)
		vio_opened(fileno(f), path, AT_FDCWD, 0, dt_);
	errno = e_;
	return f;
}

VIO_EXPORT FILE *freopen(const char *path, const char *mode, FILE *f)
{
	NEED(freopen, ENOSYS_PTR);
	return freopen_any(real_freopen, path, mode, f);
}

VIO_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *f)
{
	NEED(freopen64, ENOSYS_PTR);
	return freopen_any(real_freopen64, path, mode, f);
}

VIO_EXPORT size_t fread(void *p, size_t size, size_t n, FILE *f)
{
	NEED(fread, 0);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real_fread(p, size, n, f);
	TIMED(size_t, r, real_fread(p, size, n, f));
	vio_io(fd, s, 0, (ssize_t)(r * size), -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT size_t __fread_chk(void *p, size_t cap, size_t size, size_t n, FILE *f)
{
	NEED(__fread_chk, 0);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real___fread_chk(p, cap, size, n, f);
	TIMED(size_t, r, real___fread_chk(p, cap, size, n, f));
	vio_io(fd, s, 0, (ssize_t)(r * size), -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT size_t fwrite(const void *p, size_t size, size_t n, FILE *f)
{
	NEED(fwrite, 0);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real_fwrite(p, size, n, f);
	TIMED(size_t, r, real_fwrite(p, size, n, f));
	vio_io(fd, s, 1, (ssize_t)(r * size), -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT char *fgets(char *buf, int n, FILE *f)
{
	NEED(fgets, ENOSYS_PTR);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real_fgets(buf, n, f);
	TIMED(char *, r, real_fgets(buf, n, f));
	vio_io(fd, s, 0, r ? (ssize_t)strlen(r) : 0, -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT char *__fgets_chk(char *buf, size_t cap, int n, FILE *f)
{
	NEED(__fgets_chk, ENOSYS_PTR);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real___fgets_chk(buf, cap, n, f);
	TIMED(char *, r, real___fgets_chk(buf, cap, n, f));
	vio_io(fd, s, 0, r ? (ssize_t)strlen(r) : 0, -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT int fputs(const char *str, FILE *f)
{
	NEED(fputs, EOF);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real_fputs(str, f);
	TIMED(int, r, real_fputs(str, f));
	vio_io(fd, s, 1, r >= 0 ? (ssize_t)strlen(str) : -1, -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT int vfprintf(FILE *f, const char *fmt, va_list ap)
{
	NEED(vfprintf, -1);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real_vfprintf(f, fmt, ap);
	TIMED(int, r, real_vfprintf(f, fmt, ap));
	vio_io(fd, s, 1, r, -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT int fprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

VIO_EXPORT int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap)
{
	NEED(__vfprintf_chk, -1);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real___vfprintf_chk(f, flag, fmt, ap);
	TIMED(int, r, real___vfprintf_chk(f, flag, fmt, ap));
	vio_io(fd, s, 1, r, -1, dt_);
	errno = e_;
	return r;
}

VIO_EXPORT int __fprintf_chk(FILE *f, int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vfprintf_chk(f, flag, fmt, ap);
	va_end(ap);
	return r;
}

VIO_EXPORT int fflush(FILE *f)
{
	NEED(fflush, EOF);
	int s = fd_slot(stream_fd(f));
	if (s < 0)
		return real_fflush(f);
	TIMED(int, r, real_fflush(f));
	vio_count(s, C_WRITE_NS, dt_); /* the buffered bytes were counted by the calls that wrote them */
	errno = e_;
	return r;
}

VIO_EXPORT int fclose(FILE *f)
{
	NEED(fclose, EOF);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0)
		return real_fclose(f);
	__atomic_store_n(&vio_fds[fd].slot, 0, __ATOMIC_RELAXED);
	TIMED(int, r, real_fclose(f));
	vio_meta(s, C_CLOSES, dt_);
	errno = e_;
	return r;
}

#define FSEEK_WRAP(name, offt) \
	VIO_EXPORT int name(FILE *f, offt off, int whence) \
	{ \
		NEED(name, -1); \
		int fd = stream_fd(f), s = fd_slot(fd); \
		if (s < 0) \
			return real_##name(f, off, whence); \
		TIMED(int, r, real_##name(f, off, whence)); \
		vio_seeked(fd, s, r == 0 ? (off_t)ftello(f) : -1, dt_); \
		errno = e_; \
		return r; \
	}
FSEEK_WRAP(fseek, long)
FSEEK_WRAP(fseeko, off_t)
FSEEK_WRAP(fseeko64, off64_t)

#define FSETPOS_WRAP(name, post) \
	VIO_EXPORT int name(FILE *f, const post *pos) \
	{ \
		NEED(name, -1); \
		int fd = stream_fd(f), s = fd_slot(fd); \
		if (s < 0) \
			return real_##name(f, pos); \
		TIMED(int, r, real_##name(f, pos)); \
		vio_seeked(fd, s, r == 0 ? (off_t)ftello(f) : -1, dt_); \
		errno = e_; \
		return r; \
	}
FSETPOS_WRAP(fsetpos, fpos_t)
FSETPOS_WRAP(fsetpos64, fpos64_t)

#define FTELL_WRAP(name, offt) \
	VIO_EXPORT offt name(FILE *f) \
	{ \
		NEED(name, -1); \
		int s = fd_slot(stream_fd(f)); \
		if (s < 0) \
			return real_##name(f); \
		TIMED(offt, r, real_##name(f)); \
		vio_count(s, C_META_NS, dt_); \
		errno = e_; \
		return r; \
	}
FTELL_WRAP(ftell, long)
FTELL_WRAP(ftello, off_t)
FTELL_WRAP(ftello64, off64_t)

VIO_EXPORT void rewind(FILE *f)
{
	NEED(rewind, (void)0);
	int fd = stream_fd(f), s = fd_slot(fd);
	if (s < 0) {
		real_rewind(f);
		return;
	}
	TIMED(int, r, (real_rewind(f), 0));
	(void)r;
	vio_seeked(fd, s, 0, dt_);
	errno = e_;
}

/* ---- _exit: flush first, it runs no destructor ---- */

VIO_EXPORT void _exit(int status)
{
	vio_exiting();
	if (real__exit)
		real__exit(status);
	VIO_SYS(SYS_exit_group, status, 0, 0);
	__builtin_unreachable();
}

VIO_EXPORT void _Exit(int status)
{
	vio_exiting();
	if (real__Exit)
		real__Exit(status);
	VIO_SYS(SYS_exit_group, status, 0, 0);
	__builtin_unreachable();
}

/* ---- exec: flush first, exec does not run destructors ---- */

VIO_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	NEED(execve, (int)VIO_SYS(SYS_execve, path, argv, envp));
	vio_before_exec();
	return real_execve(path, argv, envp);
}

VIO_EXPORT int execv(const char *path, char *const argv[])
{
	NEED(execv, ENOSYS_INT);
	vio_before_exec();
	return real_execv(path, argv);
}

VIO_EXPORT int execvp(const char *file, char *const argv[])
{
	NEED(execvp, ENOSYS_INT);
	vio_before_exec();
	return real_execvp(file, argv);
}

VIO_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	NEED(execvpe, ENOSYS_INT);
	vio_before_exec();
	return real_execvpe(file, argv, envp);
}

VIO_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	NEED(fexecve, ENOSYS_INT);
	vio_before_exec();
	return real_fexecve(fd, argv, envp);
}

#define MAX_EXEC_ARGS 65536

/* Collects execl's arguments after arg0 (up to the NULL) into argv; -1 if too many. */
#define COLLECT_ARGS(ap, arg0, argv, n) \
	do { \
		va_list cp_; \
		va_copy(cp_, ap); \
		n = 1; \
		while (n < MAX_EXEC_ARGS && va_arg(cp_, char *)) \
			n++; \
		va_end(cp_); \
	} while (0)

VIO_EXPORT int execl(const char *path, const char *arg0, ...)
{
	va_list ap;
	size_t n;
	va_start(ap, arg0);
	COLLECT_ARGS(ap, arg0, argv, n);
	if (n >= MAX_EXEC_ARGS) {
		va_end(ap);
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 1];
	argv[0] = (char *)arg0;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	return execv(path, argv);
}

VIO_EXPORT int execlp(const char *file, const char *arg0, ...)
{
	va_list ap;
	size_t n;
	va_start(ap, arg0);
	COLLECT_ARGS(ap, arg0, argv, n);
	if (n >= MAX_EXEC_ARGS) {
		va_end(ap);
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 1];
	argv[0] = (char *)arg0;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	return execvp(file, argv);
}

VIO_EXPORT int execle(const char *path, const char *arg0, ...)
{
	va_list ap;
	size_t n;
	va_start(ap, arg0);
	COLLECT_ARGS(ap, arg0, argv, n);
	if (n >= MAX_EXEC_ARGS) {
		va_end(ap);
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 1];
	argv[0] = (char *)arg0;
	for (size_t i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
