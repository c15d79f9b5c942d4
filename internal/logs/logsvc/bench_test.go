package logsvc

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/relp"
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

// BenchmarkIntakeRELP measures one RELP session as librelp drives it: up
// to 128 messages unacknowledged (its default window), each acknowledged
// once fsynced.
func BenchmarkIntakeRELP(b *testing.B) {
	const perOp, window = 10000, 128
	h := start(b, b.TempDir(), func(c *Config) { c.RELPAddr = "127.0.0.1:0" })
	conn, err := net.Dial("tcp", h.svc.RELPAddr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	txnr := uint32(1)
	conn.Write(relp.AppendFrame(nil, txnr, "open", []byte("relp_version=0\ncommands=syslog")))
	r := bufio.NewReader(conn)
	readRsp := func() {
		// "TXNR rsp LEN DATA\n": the data of these has no newline except
		// after the open's offers, which end the frame with its own LF.
		var buf []byte
		for {
			c, err := r.ReadByte()
			if err != nil {
				b.Fatal(err)
			}
			buf = append(buf, c)
			if _, _, n, err := relp.ParseFrame(buf, 1<<16); err != nil {
				b.Fatal(err)
			} else if n > 0 {
				return
			}
		}
	}
	readRsp()
	var sent int
	b.ReportAllocs()
	for b.Loop() {
		w := bufio.NewWriter(conn)
		acked := 0
		for i := range perOp {
			txnr++
			msg := fmt.Sprintf("<13>2026-01-05T10:00:00.%06dZ cn%04d sshd[%d]: Accepted publickey for user%d", i%1000000, i%512, i, i%977)
			w.Write(relp.AppendFrame(nil, txnr, "syslog", []byte(msg)))
			if i+1-acked >= window {
				w.Flush()
				readRsp()
				acked++
			}
		}
		w.Flush()
		for ; acked < perOp; acked++ {
			readRsp()
		}
		sent += perOp
	}
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "msgs/s")
}
