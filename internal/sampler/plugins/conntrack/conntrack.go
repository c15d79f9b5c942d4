// Package conntrack samples the netfilter connection tracking table
// (node_exporter's conntrack collector): its size, limit and per-CPU event
// counters summed.
package conntrack

import (
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
		Name:         "conntrack",
		Description:  "connection tracking table size and events from /proc",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Conntrack{} },
		SampleConfig: sampleConfig,
	})
}

// Stats are the /proc/net/stat/nf_conntrack columns exported, by header name.
var Stats = [...]struct{ Column, Help string }{
	{"found", "Number of searched entries which were successful."},
	{"invalid", "Number of packets seen which can not be tracked."},
	{"ignore", "Number of packets seen which are already connected to a conntrack entry."},
	{"insert", "Number of entries inserted into the list."},
	{"insert_failed", "Number of entries for which list insertion was attempted but failed."},
	{"drop", "Number of packets dropped due to conntrack failure."},
	{"early_drop", "Number of dropped conntrack entries to make room for new ones, if maximum table size was reached."},
	{"search_restart", "Number of conntrack table lookups which had to be restarted due to hashtable resizes."},
}

// NumStats is len(Stats).
const NumStats = len(Stats)

// Conntrack is the conntrack plugin.
type Conntrack struct {
	count, max, stat   *kernfs.File
	countDesc, maxDesc *metric.Desc
	statDescs          [NumStats]*metric.Desc
	noStat             bool
	cols               [NumStats]int // column of each stat in the header, -1 if absent
	header             []byte
	tick               uint64
	absent             bool // no nf_conntrack module at the last look
}

// retryAbsentEvery ticks the module is looked for again (it loads with the
// first firewall rule that tracks connections).
const retryAbsentEvery = 64

// Init resolves the files under the root.
func (c *Conntrack) Init(env sampler.Env) error {
	c.count = kernfs.NewFile(env.FS.Path("proc", "sys", "net", "netfilter", "nf_conntrack_count"), 64)
	c.max = kernfs.NewFile(env.FS.Path("proc", "sys", "net", "netfilter", "nf_conntrack_max"), 64)
	c.stat = kernfs.NewFile(env.FS.Path("proc", "net", "stat", "nf_conntrack"), 4096)
	for _, f := range []*kernfs.File{c.count, c.max, c.stat} {
		f.NonBlocking = true
	}
	c.countDesc = metric.NewDesc("node_nf_conntrack_entries",
		"Number of currently allocated flow entries for connection tracking.", metric.Gauge)
	c.maxDesc = metric.NewDesc("node_nf_conntrack_entries_limit",
		"Maximum size of connection tracking table.", metric.Gauge)
	for i, s := range Stats {
		c.statDescs[i] = metric.NewDesc("node_nf_conntrack_stat_"+s.Column, s.Help, metric.Gauge)
	}
	return nil
}

// Sample reads the table size and limit and, where present, the summed
// statistics. Without the nf_conntrack module the plugin is not available.
func (c *Conntrack) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	c.tick++
	if c.absent && c.tick%retryAbsentEvery != 0 {
		return sampler.ErrNotAvailable
	}
	n, err := readUint(c.count)
	if c.absent = errors.Is(err, fs.ErrNotExist); c.absent {
		return sampler.ErrNotAvailable
	}
	if err != nil {
		return err
	}
	limit, err := readUint(c.max)
	if err != nil {
		return err
	}
	b.Add(c.countDesc, float64(n))
	b.Add(c.maxDesc, float64(limit))
	if c.noStat {
		return nil
	}
	data, err := c.stat.Read()
	if errors.Is(err, fs.ErrNotExist) {
		c.noStat = true
		return nil
	}
	if err != nil {
		return err
	}
	var sums [NumStats]uint64
	if err := c.parse(data, &sums); err != nil {
		return fmt.Errorf("%s: %w", c.stat.Path(), err)
	}
	for i, d := range c.statDescs {
		if c.cols[i] >= 0 {
			b.Add(d, float64(sums[i]))
		}
	}
	return nil
}

func (c *Conntrack) parse(data []byte, sums *[NumStats]uint64) error {
	hdr, rest := kernfs.NextLine(data)
	if c.header == nil || string(hdr) != string(c.header) {
		var err error
		if c.cols, err = Columns(hdr); err != nil {
			c.header = nil
			return err
		}
		c.header = append(c.header[:0], hdr...)
	}
	return Sum(rest, &c.cols, sums)
}

// maxColumns bounds the header (a 6.x kernel has 17 columns).
const maxColumns = 64

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

// Columns finds each of Stats in a header line; -1 for one that is absent.
func Columns(hdr []byte) (cols [NumStats]int, err error) {
	for i := range cols {
		cols[i] = -1
	}
	var f [maxColumns + 1][]byte
	n := kernfs.Fields(hdr, f[:])
	if n == 0 || n > maxColumns {
		return cols, fmt.Errorf("header with %d columns: %w", n, ErrFormat)
	}
	for j := 0; j < n; j++ {
		for i, s := range Stats {
			if string(f[j]) == s.Column {
				cols[i] = j
			}
		}
	}
	return cols, nil
}

// Sum adds up the hex columns of the per-CPU lines.
func Sum(data []byte, cols *[NumStats]int, sums *[NumStats]uint64) error {
	var f [maxColumns + 1][]byte
	for line := 2; len(data) > 0; line++ {
		var l []byte
		l, data = kernfs.NextLine(data)
		n := kernfs.Fields(l, f[:])
		if n == 0 {
			continue
		}
		for i, c := range cols {
			if c < 0 {
				continue
			}
			if c >= n {
				return fmt.Errorf("line %d: %d columns, want %d: %w", line, n, c+1, ErrFormat)
			}
			v, ok := kernfs.ParseHex(f[c], 16)
			if !ok {
				return fmt.Errorf("line %d column %d: want hex: %w", line, c+1, ErrFormat)
			}
			sums[i] += v
		}
	}
	return nil
}

func readUint(f *kernfs.File) (uint64, error) {
	data, err := f.Read()
	if err != nil {
		return 0, err
	}
	line, _ := kernfs.NextLine(data)
	v, err := kernfs.ParseUint(kernfs.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("%s: want an integer: %w", f.Path(), ErrFormat)
	}
	return v, nil
}
