//go:build linux

package appio

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// pairConn is one end of a SOCK_SEQPACKET socket pair, standing in for
// an accepted connection.
func pairConn(t testing.TB) *net.UnixConn {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "pair")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UnixConn)
}

// FuzzHandle feeds message sequences (each prefixed by a u16 length) to
// one connection's handler: nothing panics, and the series stay within
// the caps.
func FuzzHandle(f *testing.F) {
	seq := func(msgs ...[]byte) []byte {
		var b []byte
		for _, m := range msgs {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(m)))
			b = append(b, m...)
		}
		return b
	}
	rec := appio.Record{FileID: 1}
	rec.C[appio.Writes] = 1
	f.Add(seq(hello("1"), file(1, "/scratch/a"), interval(rec), appio.AppendBye(nil)), true)
	f.Add(seq(hello(""), appio.AppendFile(nil, appio.File{ID: 1, PID: 4711, Path: "/home/x"}), interval(appio.Record{FileID: 1, PID: 9, C: rec.C})), false)
	root := fixture(f, map[int]string{os.Getpid(): "3", 4711: "4"})
	cfg := DefaultConfig()
	cfg.MaxJobs, cfg.MaxMounts, cfg.MaxFilesPerJob, cfg.RecentRecords = 2, 2, 4, 8
	p := newPlugin(f, root, cfg)
	uc := pairConn(f)
	f.Fuzz(func(t *testing.T, data []byte, trusted bool) {
		c := &conn{c: uc, pid: uint32(os.Getpid()), rank: -1, trusted: trusted, files: map[uint32]*fileEnt{}}
		for len(data) >= 2 {
			n := int(binary.LittleEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			msg := data[:n]
			data = data[n:]
			if p.handle(c, msg) != nil {
				break
			}
		}
		if c.job != nil {
			p.mu.Lock()
			c.job.procs--
			c.job.files -= len(c.files)
			for _, f := range c.files {
				p.pathBytes -= len(f.path)
			}
			p.mu.Unlock()
		}
		var b metric.Batch
		now := time.Now()
		b.Reset(now)
		if err := p.Sample(context.Background(), now, &b); err != nil {
			t.Fatal(err)
		}
		// Jobs: 2 and "other", each with its processes series; file
		// systems: 2 and "other" per job.
		if max := 3*(1+3*nSeries) + nSelf; b.Len() > max {
			t.Fatalf("%d series, more than the caps allow (%d)", b.Len(), max)
		}
	})
}
