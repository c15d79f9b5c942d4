package simulate

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"time"
)

// logEvent makes one message body of a kind real HPC nodes send.
type logEvent struct {
	app  string
	sev  int // syslog severity
	text func(r *rand.Rand, node string) string
}

var logEvents = []logEvent{
	{"sshd", 6, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("Accepted publickey for user%03d from 10.%d.%d.%d port %d ssh2: RSA SHA256:%x",
			r.IntN(200), r.IntN(4), r.IntN(256), r.IntN(256), 30000+r.IntN(30000), r.Uint64())
	}},
	{"sshd", 6, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("pam_unix(sshd:session): session closed for user user%03d", r.IntN(200))
	}},
	{"slurmd", 6, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("launch task StepId=%d.%d request from UID:%d GID:%d HOST:10.0.%d.%d PORT:%d",
			100000+r.IntN(90000), r.IntN(4), 1000+r.IntN(200), 100, r.IntN(4), r.IntN(256), 40000+r.IntN(20000))
	}},
	{"slurmd", 6, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("[%d.batch] done with job", 100000+r.IntN(90000))
	}},
	{"kernel", 4, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("Lustre: scratch-OST%04x-osc-ffff%08x: Connection restored to 10.1.0.%d@o2ib (at 10.1.0.%d@o2ib)",
			r.IntN(64), r.Uint32(), r.IntN(32), r.IntN(32))
	}},
	{"kernel", 3, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("mlx5_core 0000:%02x:00.0 ib0: Link down", r.IntN(256))
	}},
	{"powerd", 4, func(r *rand.Rand, node string) string {
		return fmt.Sprintf("Node %s power budget exceeded! Power=%dW, Limit=%dW", node, 480+r.IntN(100), 450)
	}},
	{"kernel", 2, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("mce: [Hardware Error]: CPU %d: Machine Check: 0 Bank %d: be00000000800400", r.IntN(64), r.IntN(8))
	}},
	{"systemd", 6, func(r *rand.Rand, _ string) string {
		return fmt.Sprintf("Started Session %d of User user%03d.", r.IntN(100000), r.IntN(200))
	}},
}

// RunLogs sends about rate syslog messages per second (RFC 5424 over TCP,
// newline framed) from nodes 1..nodes to addr until ctx is done, so the
// demo's log views and pattern miner have something real to show.
func RunLogs(ctx context.Context, addr string, nodes int, rate int, seed uint64) error {
	if nodes < 1 {
		nodes = 1
	}
	if rate < 1 {
		rate = 1
	}
	r := rand.New(rand.NewPCG(seed, 7))
	var conn net.Conn
	var w *bufio.Writer
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if conn == nil {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				continue // the server may not be up yet; try next second
			}
			conn, w = c, bufio.NewWriter(c)
		}
		now := time.Now().UTC()
		for i := 0; i < rate; i++ {
			node := NodeName(1 + r.IntN(nodes))
			// Rare kinds are picked rarely, as on a real machine.
			ev := logEvents[min(len(logEvents)-1, int(r.ExpFloat64()*2))]
			fmt.Fprintf(w, "<%d>1 %s %s %s %d - - %s\n", 8+ev.sev, now.Format(time.RFC3339Nano), node, ev.app,
				1000+r.IntN(30000), ev.text(r, node))
		}
		if err := w.Flush(); err != nil {
			conn.Close()
			conn = nil
		}
	}
}
