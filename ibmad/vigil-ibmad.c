/*
 * vigil-ibmad: the MAD helper of Vigil's fabric sweep (internal/ibnet).
 *
 * Go cannot go through libibumad (nor through ibsim's LD_PRELOAD shim,
 * which intercepts libc), so the sweeper runs this small program and talks
 * to it over stdin/stdout with a line protocol (docs/fabric.md):
 *
 *   D                 discover the fabric; answers S/P lines, then "E <n>"
 *   Q <n>             followed by n lines "<lid> <port>": query each port's
 *                     PortCountersExtended and PortCounters; answers one C
 *                     line per port, then "E <n> <nanoseconds>"
 *   anything else     "X <message>"
 *
 * A port whose first MAD fails is answered "C <lid> <port> 0" and its
 * other query is skipped for this sweep.
 *
 * Flags: -t MAD timeout (ms), -r retries, -s SMPs in flight during
 * discovery, -w counter MADs in flight during a sweep (1 = libibmad's
 * synchronous pma_query_via).
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
			ibnd_port_t *r = port->remoteport;
			if (!r || !r->node) {
				printf("P %d %d %d %d %d %d 0 0 0 0 \n", p, state, phys, width, speed, espeed);
				continue;
			}
			unsigned rlid = r->node->type == IB_NODE_SWITCH ? r->node->smalid : r->base_lid;
			printf("P %d %d %d %d %d %d %016" PRIx64 " %d %d %u ", p, state, phys, width, speed,
			       espeed, r->node->guid, r->portnum, r->node->type, rlid);
			put_desc(r->node->nodedesc);
		}
	}
	printf("E %d\n", n);
	ibnd_destroy_fabric(f);
}

static const enum MAD_FIELDS ext_fields[] = {
	IB_PC_EXT_XMT_BYTES_F, IB_PC_EXT_RCV_BYTES_F, IB_PC_EXT_XMT_PKTS_F, IB_PC_EXT_RCV_PKTS_F,
	IB_PC_EXT_XMT_UPKTS_F, IB_PC_EXT_RCV_UPKTS_F, IB_PC_EXT_XMT_MPKTS_F, IB_PC_EXT_RCV_MPKTS_F,
};

static const enum MAD_FIELDS pc_fields[] = {
	IB_PC_ERR_SYM_F, IB_PC_LINK_RECOVERS_F, IB_PC_LINK_DOWNED_F, IB_PC_ERR_RCV_F,
	IB_PC_ERR_PHYSRCV_F, IB_PC_ERR_SWITCH_REL_F, IB_PC_XMT_DISCARDS_F, IB_PC_ERR_XMTCONSTR_F,
	IB_PC_ERR_RCVCONSTR_F, IB_PC_ERR_LOCALINTEG_F, IB_PC_ERR_EXCESS_OVR_F, IB_PC_VL15_DROPPED_F,
	IB_PC_XMT_WAIT_F,
};

static uint32_t qlid[MAX_QUERY];
static uint8_t qport[MAX_QUERY];

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void query_port(uint32_t lid, int port)
{
	uint8_t buf[1024];
	ib_portid_t id;
	memset(&id, 0, sizeof(id));
	ib_portid_set(&id, (int)lid, 0, 0);
	memset(buf, 0, sizeof(buf));
	if (!pma_query_via(buf, &id, port, timeout_ms, IB_GSI_PORT_COUNTERS_EXT, srcport)) {
		printf("C %u %d 0\n", lid, port);
		return;
	}
	uint64_t v[sizeof(ext_fields) / sizeof(ext_fields[0]) + sizeof(pc_fields) / sizeof(pc_fields[0])];
	size_t k = 0;
	for (size_t i = 0; i < sizeof(ext_fields) / sizeof(ext_fields[0]); i++) {
		uint64_t x = 0;
		mad_decode_field(buf, ext_fields[i], &x);
		v[k++] = x;
	}
	memset(buf, 0, sizeof(buf));
	if (!pma_query_via(buf, &id, port, timeout_ms, IB_GSI_PORT_COUNTERS, srcport)) {
		printf("C %u %d 0\n", lid, port);
		return;
	}
	for (size_t i = 0; i < sizeof(pc_fields) / sizeof(pc_fields[0]); i++) {
		uint32_t x = 0;
		mad_decode_field(buf, pc_fields[i], &x);
		v[k++] = x;
	}
	printf("C %u %d 1", lid, port);
	for (size_t i = 0; i < k; i++)
		printf(" %" PRIu64, v[i]);
	putchar('\n');
}

/* The windowed sweep: up to `window` PMA Gets in flight, matched to their
 * answers by transaction id; answers are printed in request order. */
#define NCOUNT 21
static uint64_t wvals[MAX_QUERY][NCOUNT];
static int8_t wstate[MAX_QUERY]; /* 0 ext due, 1 pc due, 2 done, -1 failed */

struct flight {
	long idx;
	uint32_t trid;
	int stage;
};

static int send_pma(long idx, int stage, uint32_t trid)
{
	uint8_t umad[1024];
	ib_rpc_t rpc;
	ib_portid_t id;
	uint8_t data[IB_PC_DATA_SZ];
	memset(umad, 0, sizeof(umad));
	memset(&rpc, 0, sizeof(rpc));
	memset(&id, 0, sizeof(id));
	memset(data, 0, sizeof(data));
	ib_portid_set(&id, (int)qlid[idx], 1, IB_DEFAULT_QP1_QKEY);
	rpc.mgtclass = IB_PERFORMANCE_CLASS;
	rpc.method = IB_MAD_METHOD_GET;
	rpc.attr.id = stage == 0 ? IB_GSI_PORT_COUNTERS_EXT : IB_GSI_PORT_COUNTERS;
	rpc.timeout = timeout_ms;
	rpc.datasz = IB_PC_DATA_SZ;
	rpc.dataoffs = IB_PC_DATA_OFFS;
	rpc.trid = trid;
	mad_set_field(data, 0, IB_PC_PORT_SELECT_F, qport[idx]);
	int len = mad_build_pkt(umad, &rpc, &id, NULL, data);
	if (len < 0)
		return -1;
	return umad_send(mad_rpc_portid(srcport), mad_rpc_class_agent(srcport, IB_PERFORMANCE_CLASS), umad, len,
			 timeout_ms, retries);
}

static void sweep_windowed(long n)
{
	struct flight fl[64];
	int inflight = 0;
	long next = 0;
	uint32_t trid = (uint32_t)(mad_trid() & 0xffffffff);
	uint8_t rbuf[1024];
	for (long i = 0; i < n; i++)
		wstate[i] = 0;
	while (next < n || inflight > 0) {
		while (inflight < window && next < n) {
			/* a port's PortCounters goes out after its extended counters answered */
			trid++;
			if (send_pma(next, 0, trid) < 0) {
				wstate[next++] = -1;
				continue;
			}
			fl[inflight++] = (struct flight){next++, trid, 0};
		}
		if (inflight == 0)
			break;
		int len = (int)sizeof(rbuf) - (int)umad_size();
		memset(rbuf, 0, sizeof(rbuf));
		int r = umad_recv(mad_rpc_portid(srcport), rbuf, &len, timeout_ms * (retries + 1) + 100);
		if (r < 0) { /* nothing came back in time: fail what is in flight */
			for (int k = 0; k < inflight; k++)
				wstate[fl[k].idx] = -1;
			inflight = 0;
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
		if (umad_status(rbuf) || mad_get_field(mad, 0, IB_MAD_STATUS_F)) {
			wstate[f.idx] = -1;
			continue;
		}
		uint8_t *d = mad + IB_PC_DATA_OFFS;
		if (f.stage == 0) {
			for (size_t i = 0; i < sizeof(ext_fields) / sizeof(ext_fields[0]); i++) {
				uint64_t x = 0;
				mad_decode_field(d, ext_fields[i], &x);
				wvals[f.idx][i] = x;
			}
			trid++;
			if (send_pma(f.idx, 1, trid) < 0) {
				wstate[f.idx] = -1;
				continue;
			}
			fl[inflight++] = (struct flight){f.idx, trid, 1};
		} else {
			for (size_t i = 0; i < sizeof(pc_fields) / sizeof(pc_fields[0]); i++) {
				uint32_t x = 0;
				mad_decode_field(d, pc_fields[i], &x);
				wvals[f.idx][8 + i] = x;
			}
			wstate[f.idx] = 2;
		}
	}
	for (long i = 0; i < n; i++) {
		if (wstate[i] != 2) {
			printf("C %u %d 0\n", qlid[i], qport[i]);
			continue;
		}
		printf("C %u %d 1", qlid[i], qport[i]);
		for (int k = 0; k < NCOUNT; k++)
			printf(" %" PRIu64, wvals[i][k]);
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
	if (window > 1) {
		sweep_windowed(got);
	} else {
		for (long i = 0; i < got; i++)
			query_port(qlid[i], qport[i]);
	}
	printf("E %ld %" PRId64 "\n", got, now_ns() - t0);
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
	}
	if (timeout_ms < 1 || timeout_ms > 10000)
		timeout_ms = 100;
	if (retries < 0 || retries > 10)
		retries = 1;
	if (max_smps < 1 || max_smps > 64)
		max_smps = 4;
	if (window < 1 || window > 32)
		window = 1;
	int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_PERFORMANCE_CLASS};
	srcport = mad_rpc_open_port(NULL, 0, classes, 3);
	if (!srcport) {
		printf("X cannot open the umad port\n");
		fflush(stdout);
		return 1;
	}
	mad_rpc_set_timeout(srcport, timeout_ms);
	mad_rpc_set_retries(srcport, retries);
	printf("R vigil-ibmad 1\n");
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
