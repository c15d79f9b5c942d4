// Package udpqueues sums the UDP socket queues of /proc/net/udp{,6}
// (node_exporter's udp_queues collector).
package udpqueues

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "udp_queues",
		Description:  "bytes queued on UDP sockets, from /proc/net/udp{,6}",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &UDPQueues{} },
		SampleConfig: sampleConfig,
	})
}

type family struct {
	file   *kernfs.File
	tx, rx *metric.Desc
}

// UDPQueues is the udp_queues plugin.
type UDPQueues struct {
	fams [2]family
}

const help = "Number of allocated memory in the kernel for UDP datagrams in bytes."

// Init resolves the two files under the root.
func (u *UDPQueues) Init(env sampler.Env) error {
	for i, v := range [2]string{"v4", "v6"} {
		name := "udp"
		if v == "v6" {
			name = "udp6"
		}
		f := kernfs.NewFile(env.FS.Path("proc", "net", name), 16384)
		f.NonBlocking = true // generated from the socket table in memory
		u.fams[i] = family{file: f,
			tx: metric.NewDesc("node_udp_queues", help, metric.Gauge, "queue", "tx", "ip", v),
			rx: metric.NewDesc("node_udp_queues", help, metric.Gauge, "queue", "rx", "ip", v)}
	}
	return nil
}

// ErrFormat is wrapped by parse errors.
var ErrFormat = errors.New("unexpected socket line")

// Sample sums tx_queue and rx_queue over every socket of each file. A
// missing file (no IPv6) is skipped; both missing is "not available".
func (u *UDPQueues) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var first error
	missing := 0
	for i := range u.fams {
		f := &u.fams[i]
		data, err := f.file.Read()
		if errors.Is(err, fs.ErrNotExist) {
			missing++
			continue
		}
		if err == nil {
			var tx, rx uint64
			if tx, rx, err = Sum(data); err == nil {
				b.Add(f.tx, float64(tx))
				b.Add(f.rx, float64(rx))
				continue
			}
			err = fmt.Errorf("%s: %w", f.file.Path(), err)
		}
		if first == nil {
			first = err
		}
	}
	if missing == len(u.fams) {
		return sampler.ErrNotAvailable
	}
	return first
}

// Sum adds up the queues of a /proc/net/udp file, checking each line as
// procfs does: at least eight columns, "sl:", address:port pairs, the
// state, "tx:rx" in hex, the uid. The first line is the header.
func Sum(data []byte) (tx, rx uint64, err error) {
	_, data = kernfs.NextLine(data)
	for n := 2; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		var f [8][]byte
		if k := kernfs.Fields(line, f[:]); k < 8 {
			return 0, 0, fmt.Errorf("line %d: %d columns, want at least 8: %w", n, k, ErrFormat)
		}
		if bytes.Count(f[0], []byte(":")) != 1 || bytes.Count(f[1], []byte(":")) != 1 || bytes.Count(f[2], []byte(":")) != 1 {
			return 0, 0, fmt.Errorf("line %d: want \"sl: local:port remote:port\": %w", n, ErrFormat)
		}
		if _, ok := kernfs.ParseHex(f[3], 16); !ok {
			return 0, 0, fmt.Errorf("line %d: state %q: %w", n, clip(f[3]), ErrFormat)
		}
		t, r, found := kernfs.Cut(f[4], ':')
		tv, ok1 := kernfs.ParseHex(t, 16)
		rv, ok2 := kernfs.ParseHex(r, 16)
		if !found || !ok1 || !ok2 {
			return 0, 0, fmt.Errorf("line %d: queues %q, want hex tx:rx: %w", n, clip(f[4]), ErrFormat)
		}
		if _, err := kernfs.ParseUint(f[7]); err != nil {
			return 0, 0, fmt.Errorf("line %d: uid %q: %w", n, clip(f[7]), ErrFormat)
		}
		tx += tv
		rx += rv
	}
	return tx, rx, nil
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
