package logsvc

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// BenchmarkIntakeTCP measures messages per second through one TCP
// connection: framed, parsed, mined, stored and fsynced.
func BenchmarkIntakeTCP(b *testing.B) {
	const perOp = 10000
	h := start(b, b.TempDir(), nil)
	var buf []byte
	for i := range perOp {
		buf = fmt.Appendf(buf, "<%d>Jan  5 10:00:00 cn%04d sshd[%d]: Accepted publickey for user%d from 10.1.%d.%d port %d ssh2\n",
			8+i%8, i%512, i, i%977, i%251, i%13, i%65000)
	}
	conn, err := net.Dial("tcp", h.tcpAddr())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	var want uint64
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
		want += perOp
		for h.svc.Stats().Accepted < want {
			time.Sleep(50 * time.Microsecond)
		}
	}
	b.ReportMetric(float64(want)/b.Elapsed().Seconds(), "msgs/s")
}
