//go:build ignore

// readfloor is a measuring instrument for bench/samplercost, not part of
// Vigil: the tool compiles it with gcc into a temporary directory at run time.
//
// It wakes on wall-clock multiples of an interval, like the sampler, and asks
// the kernel for exactly what the sampler's plugins ask for, without parsing
// anything: pread of each -r file into one buffer, a zero-timeout ppoll of
// each -p file (re-read every -k ticks), statfs of each -s path and, with -u,
// getrusage, with -n uname(2), with -a a read-only adjtimex(2) and with -l
// one netlink RTM_GETSTATS dump of every interface's counters (the netdev
// plugin's source on the live system), read to its end, and with -P PROC
// every -Q ticks a listing of PROC and a pread of each process's stat file,
// kept open while the process lives: the least the procs plugin reads. Its CPU time per tick is the floor of any 10 Hz reader on the
// machine; what vigil-sampler spends above it is Go and our parsing.
//
//	readfloor -i NANOSECONDS [-u] [-n] [-a] [-l] [-k TICKS] [-P PROC [-Q TICKS]] [-r FILE]... [-p FILE]... [-s PATH]...
//
// It runs until killed. (The go:build line keeps the go tool away from it.)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/timex.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

enum { MAXN = 256 };

static char buf[1 << 20]; /* one pread per file, as the sampler's grown buffers */

/* -P: one stat descriptor per live process, by pid. */
enum { MAXPID = 1 << 22 };
static int statfd[MAXPID];
static long long seen[MAXPID];
static int live[MAXPID], nlive;
static char dents[1 << 16];

static void read_procs(int dirfd, long long tick) {
	lseek(dirfd, 0, SEEK_SET);
	for (;;) {
		long n = syscall(SYS_getdents64, dirfd, dents, sizeof dents);
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			unsigned short reclen = *(unsigned short *)(dents + off + 16);
			const char *name = dents + off + 19;
			off += reclen;
			long pid = 0;
			const char *c = name;
			for (; *c >= '0' && *c <= '9'; c++)
				pid = pid * 10 + (*c - '0');
			if (*c || c == name || pid <= 0 || pid >= MAXPID)
				continue;
			if (statfd[pid] <= 0) {
				char path[32];
				snprintf(path, sizeof path, "%ld/stat", pid);
				statfd[pid] = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
				if (statfd[pid] < 0) {
					statfd[pid] = 0;
					continue;
				}
				live[nlive++] = (int)pid;
			}
			seen[pid] = tick;
			pread(statfd[pid], buf, 4096, 0);
		}
	}
	for (int i = 0; i < nlive;) { /* close the stat files of processes gone */
		int pid = live[i];
		if (seen[pid] != tick) {
			close(statfd[pid]);
			statfd[pid] = 0;
			live[i] = live[--nlive];
		} else {
			i++;
		}
	}
}

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int open_or_die(const char *path) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	return fd;
}

int main(int argc, char **argv) {
	long long iv = 0, every = 100, procsEvery = 1;
	int procdir = -1;
	int rusage = 0, unamecall = 0, adjtimexcall = 0, nlfd = -1, nr = 0, np = 0, ns = 0, opt;
	int rfd[MAXN];
	/* Per-file read size, grown like kernfs.File's buffer: /proc/sys
	 * handlers allocate and zero as much as a read asks for, so asking
	 * 1 MiB of a 10-byte file would cost the floor more than the sampler. */
	size_t rsz[MAXN];
	struct pollfd pfd[MAXN];
	const char *spath[MAXN];

	while ((opt = getopt(argc, argv, "i:unalk:r:p:s:P:Q:")) != -1) {
		if ((opt == 'r' && nr == MAXN) || (opt == 'p' && np == MAXN) || (opt == 's' && ns == MAXN)) {
			fprintf(stderr, "readfloor: more than %d of -%c\n", MAXN, opt);
			return 2;
		}
		switch (opt) {
		case 'i': iv = atoll(optarg); break;
		case 'u': rusage = 1; break;
		case 'n': unamecall = 1; break;
		case 'a': adjtimexcall = 1; break;
		case 'l':
			nlfd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
			if (nlfd < 0) {
				perror("netlink socket");
				exit(1);
			}
			break;
		case 'k': every = atoll(optarg); break;
		case 'P':
			procdir = open(optarg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (procdir < 0) {
				perror(optarg);
				exit(1);
			}
			break;
		case 'Q': procsEvery = atoll(optarg); break;
		case 'r':
			rsz[nr] = 4096;
			rfd[nr++] = open_or_die(optarg);
			break;
		case 'p':
			pfd[np].fd = open_or_die(optarg);
			pfd[np++].events = POLLPRI;
			break;
		case 's': spath[ns++] = optarg; break;
		default:
			fprintf(stderr, "usage: readfloor -i NS [-u] [-n] [-a] [-l] [-k TICKS] [-P PROC [-Q TICKS]] [-r FILE]... [-p FILE]... [-s PATH]...\n");
			return 2;
		}
	}
	if (iv <= 0 || every <= 0 || procsEvery <= 0) {
		fprintf(stderr, "readfloor: -i, -k and -Q must be positive\n");
		return 2;
	}

	long long next = (now_ns() / iv + 1) * iv;
	for (long long tick = 0;; tick++) {
		struct timespec ts = {next / 1000000000LL, next % 1000000000LL};
		while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		for (int i = 0; i < nr; i++)
			while (pread(rfd[i], buf, rsz[i], 0) == (ssize_t)rsz[i] && rsz[i] < sizeof buf)
				rsz[i] *= 2;
		if (np > 0) {
			struct timespec zero = {0, 0};
			ppoll(pfd, np, &zero, NULL);
			if (tick % every == 0)
				for (int i = 0; i < np; i++)
					pread(pfd[i].fd, buf, sizeof buf, 0);
		}
		for (int i = 0; i < ns; i++) {
			struct statfs st;
			statfs(spath[i], &st);
		}
		if (rusage) {
			struct rusage ru;
			getrusage(RUSAGE_SELF, &ru);
		}
		if (unamecall) {
			struct utsname u;
			uname(&u);
		}
		if (adjtimexcall) {
			struct timex tx = {0};
			adjtimex(&tx);
		}
		if (nlfd >= 0) {
			struct {
				struct nlmsghdr h;
				struct if_stats_msg m;
			} req;
			memset(&req, 0, sizeof req);
			req.h.nlmsg_len = sizeof req;
			req.h.nlmsg_type = RTM_GETSTATS;
			req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
			req.h.nlmsg_seq = (unsigned)tick + 1;
			req.m.filter_mask = IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64);
			if (send(nlfd, &req, sizeof req, 0) == (ssize_t)sizeof req) {
				for (int done = 0; !done;) {
					ssize_t r = recv(nlfd, buf, sizeof buf, MSG_DONTWAIT);
					if (r <= 0)
						break;
					for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, r); h = NLMSG_NEXT(h, r))
						if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
							done = 1;
				}
			}
		}
		if (procdir >= 0 && tick % procsEvery == 0)
			read_procs(procdir, tick + 1);
		/* Skip ticks that already passed, as the sampler does. */
		next = (now_ns() / iv + 1) * iv;
	}
}
