/*
 * vigil-ibmad: the MAD helper of Vigil's fabric sweep (internal/ibnet).
 *
 * Go cannot go through libibumad (nor through ibsim's LD_PRELOAD shim,
 * which intercepts libc), so the sweeper runs this small program and talks
 * to it over stdin/stdout with a line protocol (docs/fabric.md):
 *
 *   D                 discover the fabric; answers S/P lines, then "E <n>"
 *   Q <n>             followed by n lines "<lid> <port>": query each port's
 *                     PortCountersExtended, PortCounters and the optional
 *                     PortXmitDiscardDetails, PortRcvErrorDetails and
 *                     PortVLXmitWaitCounters; answers one C line per port,
 *                     then "E <n> <nanoseconds> <MADs>"
 *   anything else     "X <message>"
 *
 * A port whose first MAD fails is answered "C <lid> <port> 0" and its
 * other queries are skipped for this sweep; an optional attribute that a
 * switch refuses or does not answer is skipped (flagged in the C line)
 * and not asked of that switch again until the next discovery.
 *
 * Flags: -t MAD timeout (ms), -r retries, -s SMPs in flight during
 * discovery, -w counter MADs in flight during a sweep (1 = libibmad's
 * synchronous mad_rpc), -v the attribute id asked in place of
 * PortVLXmitWaitCounters (a test hook: ibsim refuses some ids).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <inttypes.h>

#include <infiniband/mad.h>
#include <infiniband/umad.h>
#include <infiniband/ibnetdisc.h>

#define MAX_QUERY 65536 /* ports per Q request: 256 switches x 255 ports fit */
#define LINE_MAX_LEN 256

static struct ibmad_port *srcport;
static int timeout_ms = 100;
static int retries = 1;
static int max_smps = 4;
static int window = 1; /* PMA MADs in flight during a sweep */
#define MAX_LID 0xc000
static uint8_t lidcap[MAX_LID]; /* what each switch's PMA offers (L_* below) */

/* Node descriptions are untrusted bytes: keep printable ASCII, no newlines. */
static void put_desc(const char *d)
{
	size_t n = strnlen(d, IB_SMP_DATA_SIZE);
	while (n > 0 && (d[n - 1] == ' ' || d[n - 1] == '\0'))
		n--;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)d[i];
		putchar(c >= 0x20 && c < 0x7f ? c : '?');
	}
	putchar('\n');
}

static void discover(void)
{
	ibnd_config_t cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_smps = max_smps;
	/* Discovery is rare and walks every node: be patient with it. */
	cfg.timeout_ms = timeout_ms < 500 ? 500 : timeout_ms;
	cfg.retries = retries;
	memset(lidcap, 0, sizeof(lidcap)); /* LIDs and parts may have changed */
	ibnd_fabric_t *f = ibnd_discover_fabric(NULL, 0, NULL, &cfg);
	if (!f) {
		printf("X discovery failed\n");
		return;
	}
	int n = 0;
	for (ibnd_node_t *node = f->nodes; node; node = node->next) {
		if (node->type != IB_NODE_SWITCH)
			continue;
		n++;
		printf("S %016" PRIx64 " %u %d ", node->guid, node->smalid, node->numports);
		put_desc(node->nodedesc);
		for (int p = 1; p <= node->numports; p++) {
			ibnd_port_t *port = node->ports ? node->ports[p] : NULL;
			if (!port)
				continue;
			int state = mad_get_field(port->info, 0, IB_PORT_STATE_F);
			int phys = mad_get_field(port->info, 0, IB_PORT_PHYS_STATE_F);
			int width = mad_get_field(port->info, 0, IB_PORT_LINK_WIDTH_ACTIVE_F);
			int speed = mad_get_field(port->info, 0, IB_PORT_LINK_SPEED_ACTIVE_F);
			int espeed = mad_get_field(port->info, 0,
						   IB_PORT_LINK_SPEED_EXT_ACTIVE_F);
			int opvls = mad_get_field(port->info, 0, IB_PORT_OPER_VLS_F);
			ibnd_port_t *r = port->remoteport;
			if (!r || !r->node) {
				printf("P %d %d %d %d %d %d %d 0 0 0 0 \n", p, state, phys, width, speed, espeed, opvls);
				continue;
			}
			unsigned rlid = r->node->type == IB_NODE_SWITCH ? r->node->smalid : r->base_lid;
			printf("P %d %d %d %d %d %d %d %016" PRIx64 " %d %d %u ", p, state, phys, width, speed,
			       espeed, opvls, r->node->guid, r->portnum, r->node->type, rlid);
			put_desc(r->node->nodedesc);
		}
	}
	printf("E %d\n", n);
	ibnd_destroy_fabric(f);
}

/* The counters of a C line, in order: PortCountersExtended (8),
 * PortCounters (13), PortXmitDiscardDetails (4), PortRcvErrorDetails (6),
 * PortVLXmitWaitCounters (16). */
#define NEXT 8
#define NPC 13
#define NXDD 4
#define NRED 6
#define NVL 16
#define OFF_XDD (NEXT + NPC)
#define OFF_RED (OFF_XDD + NXDD)
#define OFF_VL (OFF_RED + NRED)
#define NCOUNT (OFF_VL + NVL)

static const enum MAD_FIELDS ext_fields[NEXT] = {
	IB_PC_EXT_XMT_BYTES_F, IB_PC_EXT_RCV_BYTES_F, IB_PC_EXT_XMT_PKTS_F, IB_PC_EXT_RCV_PKTS_F,
	IB_PC_EXT_XMT_UPKTS_F, IB_PC_EXT_RCV_UPKTS_F, IB_PC_EXT_XMT_MPKTS_F, IB_PC_EXT_RCV_MPKTS_F,
};

static const enum MAD_FIELDS pc_fields[NPC] = {
	IB_PC_ERR_SYM_F, IB_PC_LINK_RECOVERS_F, IB_PC_LINK_DOWNED_F, IB_PC_ERR_RCV_F,
	IB_PC_ERR_PHYSRCV_F, IB_PC_ERR_SWITCH_REL_F, IB_PC_XMT_DISCARDS_F, IB_PC_ERR_XMTCONSTR_F,
	IB_PC_ERR_RCVCONSTR_F, IB_PC_ERR_LOCALINTEG_F, IB_PC_ERR_EXCESS_OVR_F, IB_PC_VL15_DROPPED_F,
	IB_PC_XMT_WAIT_F,
};

static const enum MAD_FIELDS xdd_fields[NXDD] = {
	IB_PC_XMT_INACT_DISC_F, IB_PC_XMT_NEIGH_MTU_DISC_F, IB_PC_XMT_SW_LIFE_DISC_F, IB_PC_XMT_SW_HOL_DISC_F,
};

static const enum MAD_FIELDS red_fields[NRED] = {
	IB_PC_RCV_LOCAL_PHY_ERR_F, IB_PC_RCV_MALFORMED_PKT_ERR_F, IB_PC_RCV_BUF_OVR_ERR_F,
	IB_PC_RCV_DLID_MAP_ERR_F, IB_PC_RCV_VL_MAP_ERR_F, IB_PC_RCV_LOOPING_ERR_F,
};

/* A port's queries, in order; ST_CPI is a switch's ClassPortInfo. The
 * first two are required (their failure fails the port), the others are
 * optional attributes a PMA may not implement. */
enum { ST_EXT, ST_PC, ST_XDD, ST_RED, ST_VL, ST_DONE, ST_CPI };

static unsigned vl_attr = IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS; /* -v: a test hook */

static unsigned stage_attr(int st)
{
	switch (st) {
	case ST_EXT: return IB_GSI_PORT_COUNTERS_EXT;
	case ST_PC: return IB_GSI_PORT_COUNTERS;
	case ST_XDD: return IB_GSI_PORT_XMIT_DISCARD_DETAILS;
	case ST_RED: return IB_GSI_PORT_RCV_ERROR_DETAILS;
	case ST_VL: return vl_attr;
	default: return CLASS_PORT_INFO;
	}
}

/* C line flags: which optional groups were read, which were skipped
 * because the PMA refused or did not answer them. */
#define F_XDD 1
#define F_RED 2
#define F_VL 4
#define F_XDD_SKIP 8
#define F_RED_SKIP 16
#define F_VL_SKIP 32

/* What each switch's PMA offers, by LID, learnt during sweeps and
 * forgotten at each discovery (a part swap may change it). */
#define L_KNOWN 1   /* ClassPortInfo answered */
#define L_XWAIT 2   /* its CapabilityMask has PortCountersXmitWaitSupported */
#define L_NO_XDD 4  /* refused or did not answer PortXmitDiscardDetails */
#define L_NO_RED 8
#define L_NO_VL 16
#define L_DEAD 32   /* ClassPortInfo unanswered this sweep: its ports fail */
#define L_QUEUED 64 /* ClassPortInfo queued this sweep */
#define CAP_XMIT_WAIT (1u << 12)

static uint32_t qlid[MAX_QUERY];
static uint8_t qport[MAX_QUERY];
static uint64_t wvals[MAX_QUERY][NCOUNT];
static int8_t wstate[MAX_QUERY]; /* 0 under way, 1 read, -1 failed */
static uint8_t wflags[MAX_QUERY];
static uint32_t cpilid[MAX_QUERY];
static long mads; /* MADs sent this sweep */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The next query of port i after stage st, skipping the optional ones its
 * switch does not offer. VLXmitWaitCounters has no capability bit of its
 * own: it is asked where PortXmitWait is supported (bit 12), and an
 * "unsupported" answer settles it. */
static int next_stage(long i, int st)
{
	uint8_t c = lidcap[qlid[i]];
	for (st++; st < ST_DONE; st++) {
		if (st == ST_XDD && (c & L_NO_XDD))
			continue;
		if (st == ST_RED && (c & L_NO_RED))
			continue;
		if (st == ST_VL && (!(c & L_XWAIT) || (c & L_NO_VL)))
			continue;
		break;
	}
	return st;
}

static int first_stage(long i)
{
	wstate[i] = 0;
	wflags[i] = 0;
	if (lidcap[qlid[i]] & L_DEAD) {
		wstate[i] = -1; /* its switch did not answer ClassPortInfo */
		return ST_DONE;
	}
	return ST_EXT;
}

static void decode(long i, int st, uint8_t *d)
{
	uint64_t *v = wvals[i];
	switch (st) {
	case ST_EXT:
		for (int k = 0; k < NEXT; k++) {
			uint64_t x = 0;
			mad_decode_field(d, ext_fields[k], &x);
			v[k] = x;
		}
		break;
	case ST_PC:
		for (int k = 0; k < NPC; k++)
			v[NEXT + k] = mad_get_field(d, 0, pc_fields[k]);
		break;
	case ST_XDD:
		for (int k = 0; k < NXDD; k++)
			v[OFF_XDD + k] = mad_get_field(d, 0, xdd_fields[k]);
		wflags[i] |= F_XDD;
		break;
	case ST_RED:
		for (int k = 0; k < NRED; k++)
			v[OFF_RED + k] = mad_get_field(d, 0, red_fields[k]);
		wflags[i] |= F_RED;
		break;
	case ST_VL:
		for (int k = 0; k < NVL; k++)
			v[OFF_VL + k] = mad_get_field(d, 0, IB_PC_PORT_VL_XMIT_WAIT0_F + k);
		wflags[i] |= F_VL;
		break;
	}
}

/* advance takes the outcome of port i's query st (res 1 answered, 0 the
 * PMA answered with an error status, -1 no answer) and returns its next
 * query. After a port's first failed MAD the rest of its queries are
 * skipped for this sweep: a failed required query fails the port, a
 * failed optional one only drops that attribute (and, for its switch,
 * until the next discovery). */
static int advance(long i, int st, int res, uint8_t *d)
{
	if (res != 1) {
		if (st <= ST_PC) {
			wstate[i] = -1;
			return ST_DONE;
		}
		uint8_t no = st == ST_XDD ? L_NO_XDD : st == ST_RED ? L_NO_RED : L_NO_VL;
		uint8_t skip = st == ST_XDD ? F_XDD_SKIP : st == ST_RED ? F_RED_SKIP : F_VL_SKIP;
		lidcap[qlid[i]] |= no;
		wflags[i] |= skip;
		wstate[i] = 1;
		return ST_DONE;
	}
	decode(i, st, d);
	int nx = next_stage(i, st);
	if (nx == ST_DONE)
		wstate[i] = 1;
	return nx;
}

/* cpi_done records switch j's ClassPortInfo: an error status means no
 * optional attribute is asked by capability (the details still are), no
 * answer fails the switch's ports for this sweep without more MADs. */
static void cpi_done(long j, int res, uint8_t *d)
{
	uint32_t lid = cpilid[j];
	lidcap[lid] &= (uint8_t)~L_QUEUED;
	if (res < 0) {
		lidcap[lid] |= L_DEAD;
		return;
	}
	lidcap[lid] |= L_KNOWN;
	if (res == 1 && (mad_get_field(d, 0, IB_CPI_CAPMASK_F) & CAP_XMIT_WAIT))
		lidcap[lid] |= L_XWAIT;
}

/* The switches (LIDs) of this request whose ClassPortInfo is not known. */
static long cpi_todo(long n)
{
	long m = 0;
	for (long i = 0; i < n; i++) {
		uint32_t lid = qlid[i];
		lidcap[lid] &= (uint8_t)~L_DEAD;
		if (lidcap[lid] & (L_KNOWN | L_QUEUED))
			continue;
		lidcap[lid] |= L_QUEUED;
		cpilid[m++] = lid;
	}
	return m;
}

/* One PMA Get, synchronously through libibmad (mad_window = 1). */
static int pma_get(uint32_t lid, int port, unsigned attr, uint8_t *buf)
{
	ib_rpc_t rpc;
	ib_portid_t id;
	memset(&rpc, 0, sizeof(rpc));
	memset(&id, 0, sizeof(id));
	memset(buf, 0, IB_PC_DATA_SZ);
	ib_portid_set(&id, (int)lid, 1, IB_DEFAULT_QP1_QKEY);
	rpc.mgtclass = IB_PERFORMANCE_CLASS;
	rpc.method = IB_MAD_METHOD_GET;
	rpc.attr.id = attr;
	rpc.timeout = timeout_ms;
	rpc.datasz = IB_PC_DATA_SZ;
	rpc.dataoffs = IB_PC_DATA_OFFS;
	mad_set_field(buf, 0, IB_PC_PORT_SELECT_F, port);
	mads++;
	if (mad_rpc(srcport, &rpc, &id, buf, buf))
		return 1;
	return rpc.rstatus ? 0 : -1;
}

static void sweep_sync(long n, long ncpi)
{
	uint8_t buf[1024];
	for (long j = 0; j < ncpi; j++)
		cpi_done(j, pma_get(cpilid[j], 0, CLASS_PORT_INFO, buf), buf);
	for (long i = 0; i < n; i++) {
		int st = first_stage(i);
		while (st != ST_DONE)
			st = advance(i, st, pma_get(qlid[i], qport[i], stage_attr(st), buf), buf);
	}
}

/* The windowed sweep: up to `window` PMA Gets in flight (one per port or
 * switch at a time), matched to their answers by transaction id. */
static uint32_t trid;

static int send_pma(uint32_t lid, int port, unsigned attr, uint32_t t)
{
	uint8_t umad[1024];
	ib_rpc_t rpc;
	ib_portid_t id;
	uint8_t data[IB_PC_DATA_SZ];
	memset(umad, 0, sizeof(umad));
	memset(&rpc, 0, sizeof(rpc));
	memset(&id, 0, sizeof(id));
	memset(data, 0, sizeof(data));
	ib_portid_set(&id, (int)lid, 1, IB_DEFAULT_QP1_QKEY);
	rpc.mgtclass = IB_PERFORMANCE_CLASS;
	rpc.method = IB_MAD_METHOD_GET;
	rpc.attr.id = attr;
	rpc.timeout = timeout_ms;
	rpc.datasz = IB_PC_DATA_SZ;
	rpc.dataoffs = IB_PC_DATA_OFFS;
	rpc.trid = t;
	mad_set_field(data, 0, IB_PC_PORT_SELECT_F, port);
	int len = mad_build_pkt(umad, &rpc, &id, NULL, data);
	if (len < 0)
		return -1;
	mads++;
	return umad_send(mad_rpc_portid(srcport), mad_rpc_class_agent(srcport, IB_PERFORMANCE_CLASS), umad, len,
			 timeout_ms, retries);
}

struct flight {
	long idx;
	uint32_t trid;
	int stage;
};

/* outcome feeds one result to item i (a switch for ST_CPI, else a port)
 * and returns its next query. */
static int outcome(long i, int st, int res, uint8_t *d)
{
	if (st == ST_CPI) {
		cpi_done(i, res, d);
		return ST_DONE;
	}
	return advance(i, st, res, d);
}

/* launch sends item i's query st, or the next one after a failed send. */
static void launch(struct flight *fl, int *inflight, long i, int st)
{
	while (st != ST_DONE) {
		uint32_t lid = st == ST_CPI ? cpilid[i] : qlid[i];
		int port = st == ST_CPI ? 0 : qport[i];
		uint32_t t = ++trid;
		if (send_pma(lid, port, stage_attr(st), t) == 0) {
			fl[(*inflight)++] = (struct flight){i, t, st};
			return;
		}
		st = outcome(i, st, -1, NULL);
	}
}

/* run_windowed runs n items: switches' ClassPortInfo (cpi) or ports. */
static void run_windowed(long n, int cpi)
{
	struct flight fl[64];
	int inflight = 0;
	long next = 0;
	uint8_t rbuf[1024];
	while (next < n || inflight > 0) {
		while (inflight < window && next < n) {
			long i = next++;
			launch(fl, &inflight, i, cpi ? ST_CPI : first_stage(i));
		}
		if (inflight == 0)
			continue;
		int len = (int)sizeof(rbuf) - (int)umad_size();
		memset(rbuf, 0, sizeof(rbuf));
		int r = umad_recv(mad_rpc_portid(srcport), rbuf, &len, timeout_ms * (retries + 1) + 100);
		if (r < 0) { /* nothing came back in time: what is in flight failed */
			struct flight lost[64];
			int nlost = inflight;
			memcpy(lost, fl, sizeof(fl[0]) * (size_t)nlost);
			inflight = 0;
			for (int k = 0; k < nlost; k++)
				launch(fl, &inflight, lost[k].idx, outcome(lost[k].idx, lost[k].stage, -1, NULL));
			continue;
		}
		uint8_t *mad = umad_get_mad(rbuf);
		uint32_t got = (uint32_t)(mad_get_field64(mad, 0, IB_MAD_TRID_F) & 0xffffffff);
		int k;
		for (k = 0; k < inflight; k++)
			if (fl[k].trid == got)
				break;
		if (k == inflight)
			continue; /* stale answer */
		struct flight f = fl[k];
		fl[k] = fl[--inflight];
		int res = umad_status(rbuf) ? -1 : mad_get_field(mad, 0, IB_MAD_STATUS_F) ? 0 : 1;
		launch(fl, &inflight, f.idx, outcome(f.idx, f.stage, res, mad + IB_PC_DATA_OFFS));
	}
}

static void print_results(long n)
{
	for (long i = 0; i < n; i++) {
		if (wstate[i] != 1) {
			printf("C %u %d 0\n", qlid[i], qport[i]);
			continue;
		}
		printf("C %u %d 1 %u", qlid[i], qport[i], wflags[i]);
		for (int k = 0; k < NCOUNT; k++) {
			int group = k >= OFF_VL ? F_VL : k >= OFF_RED ? F_RED : k >= OFF_XDD ? F_XDD : 0;
			/* an attribute not read this sweep reads 0: the flags say so */
			printf(" %" PRIu64, group == 0 || (wflags[i] & group) ? wvals[i][k] : 0);
		}
		putchar('\n');
	}
}

static void sweep(long n)
{
	char line[LINE_MAX_LEN];
	long got = 0;
	int bad = 0;
	for (long i = 0; i < n; i++) {
		if (!fgets(line, sizeof(line), stdin))
			exit(0);
		unsigned long lid, port;
		if (sscanf(line, "%lu %lu", &lid, &port) != 2 || lid == 0 || lid >= 0xc000 || port > 254) {
			bad = 1;
			continue;
		}
		qlid[got] = (uint32_t)lid;
		qport[got] = (uint8_t)port;
		got++;
	}
	if (bad) {
		printf("X bad port line in query\n");
		return;
	}
	int64_t t0 = now_ns();
	mads = 0;
	long ncpi = cpi_todo(got);
	if (window > 1) {
		run_windowed(ncpi, 1);
		run_windowed(got, 0);
	} else {
		sweep_sync(got, ncpi);
	}
	int64_t ns = now_ns() - t0;
	print_results(got);
	printf("E %ld %" PRId64 " %ld\n", got, ns, mads);
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-t"))
			timeout_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-r"))
			retries = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s"))
			max_smps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-w"))
			window = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-v"))
			vl_attr = (unsigned)strtoul(argv[i + 1], NULL, 0);
	}
	if (timeout_ms < 1 || timeout_ms > 10000)
		timeout_ms = 100;
	if (retries < 0 || retries > 10)
		retries = 1;
	if (max_smps < 1 || max_smps > 64)
		max_smps = 4;
	if (window < 1 || window > 32)
		window = 1;
	if (vl_attr < 1 || vl_attr > 0xffff)
		vl_attr = IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS;
	int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_PERFORMANCE_CLASS};
	srcport = mad_rpc_open_port(NULL, 0, classes, 3);
	if (!srcport) {
		printf("X cannot open the umad port\n");
		fflush(stdout);
		return 1;
	}
	mad_rpc_set_timeout(srcport, timeout_ms);
	mad_rpc_set_retries(srcport, retries);
	trid = (uint32_t)(mad_trid() & 0xffffffff);
	printf("R vigil-ibmad 2\n");
	fflush(stdout);
	char line[LINE_MAX_LEN];
	while (fgets(line, sizeof(line), stdin)) {
		if (line[0] == 'D' && (line[1] == '\n' || line[1] == '\0')) {
			discover();
		} else if (line[0] == 'Q' && line[1] == ' ') {
			long n = strtol(line + 2, NULL, 10);
			if (n < 0 || n > MAX_QUERY)
				printf("X query too large\n");
			else
				sweep(n);
		} else {
			printf("X unknown request\n");
		}
		fflush(stdout);
	}
	mad_rpc_close_port(srcport);
	return 0;
}
