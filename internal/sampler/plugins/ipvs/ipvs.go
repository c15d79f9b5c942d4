// Package ipvs samples the IP Virtual Server tables (node_exporter's ipvs
// collector): totals from /proc/net/ip_vs_stats and the connections and
// weight of every (virtual service, real server) pair from /proc/net/ip_vs.
package ipvs

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

// Labels are the backend labels node_exporter knows, in its order.
var Labels = [...]string{"local_address", "local_port", "remote_address", "remote_port", "proto", "local_mark"}

const (
	lLocalAddr = iota
	lLocalPort
	lRemoteAddr
	lRemotePort
	lProto
	lMark
)

func init() {
	sampler.Register(sampler.Registration{
		Name:        "ipvs",
		Description: "IPVS totals and backends from /proc/net/ip_vs{,_stats}",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &Config{BackendLabels: Labels[:], MaxBackends: 4096}
		},
		New:          func(c sampler.Configurable) sampler.Plugin { return &IPVS{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.ipvs] table.
type Config struct {
	sampler.Common
	// BackendLabels is node_exporter's --collector.ipvs.backend-labels:
	// backends that differ only in labels left out are summed.
	BackendLabels []string `toml:"backend_labels"`
	// MaxBackends bounds the backend series of a tick.
	MaxBackends int `toml:"max_backends"`
}

// Validate checks the label names and the bound.
func (c *Config) Validate() error {
	_, err := c.labelSet()
	if err == nil && c.MaxBackends < 1 {
		err = fmt.Errorf("max_backends must be at least 1, got %d", c.MaxBackends)
	}
	return err
}

func (c *Config) labelSet() (set [len(Labels)]bool, err error) {
	for _, l := range c.BackendLabels {
		found := false
		for i, k := range Labels {
			if l == k {
				set[i], found = true, true
			}
		}
		if !found {
			return set, fmt.Errorf("backend_labels: unknown label %q, want some of %q", l, Labels[:])
		}
	}
	return set, nil
}

var totals = [NumStats]struct{ name, help string }{
	{"node_ipvs_connections_total", "The total number of connections made."},
	{"node_ipvs_incoming_packets_total", "The total number of incoming packets."},
	{"node_ipvs_outgoing_packets_total", "The total number of outgoing packets."},
	{"node_ipvs_incoming_bytes_total", "The total amount of incoming data."},
	{"node_ipvs_outgoing_bytes_total", "The total amount of outgoing data."},
}

// group is one backend series set: the backends whose selected labels are
// equal, summed as node_exporter does.
type group struct {
	active, inactive, weight *metric.Desc
	sums                     [3]uint64
	seen                     uint64
}

// IPVS is the ipvs plugin.
type IPVS struct {
	cfg        Config
	labels     [len(Labels)]bool
	stats, vs  *kernfs.File
	totalDescs [NumStats]*metric.Desc
	groups     map[string]*group
	order      []*group // groups of this tick, in order of first backend
	key        []byte
	scan       Scanner
	tick       uint64
	absent     bool // no ip_vs module at the last look
}

// retryAbsentEvery ticks the module is looked for again (it loads when the
// first virtual service is configured).
const retryAbsentEvery = 64

// Init resolves the files under the root.
func (p *IPVS) Init(env sampler.Env) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	p.labels, _ = p.cfg.labelSet()
	p.stats = kernfs.NewFile(env.FS.Path("proc", "net", "ip_vs_stats"), 1024)
	p.vs = kernfs.NewFile(env.FS.Path("proc", "net", "ip_vs"), 4096)
	// Both are generated from in-memory tables.
	p.stats.NonBlocking, p.vs.NonBlocking = true, true
	for i, t := range totals {
		p.totalDescs[i] = metric.NewDesc(t.name, t.help, metric.Counter)
	}
	p.groups = map[string]*group{}
	return nil
}

// Sample reads the totals, then the backends. Without the ip_vs module the
// plugin is not available; a malformed backend table fails the tick after
// the totals, as upstream.
func (p *IPVS) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	p.tick++
	if p.absent && p.tick%retryAbsentEvery != 0 {
		return sampler.ErrNotAvailable
	}
	data, err := p.stats.Read()
	if p.absent = errors.Is(err, fs.ErrNotExist); p.absent {
		return sampler.ErrNotAvailable
	}
	if err != nil {
		return err
	}
	st, err := ParseStats(data)
	if err != nil {
		return fmt.Errorf("%s: %w", p.stats.Path(), err)
	}
	for i, d := range p.totalDescs {
		b.Add(d, float64(st[i]))
	}
	if data, err = p.vs.Read(); err != nil {
		return err
	}
	p.order = p.order[:0]
	var first error
	p.scan.Reset(data)
	for p.scan.Next() {
		g := p.group(&p.scan.B)
		if g == nil {
			if first == nil {
				first = fmt.Errorf("%s: more than %d backend series", p.vs.Path(), p.cfg.MaxBackends)
			}
			continue
		}
		if g.seen != p.tick {
			g.seen, g.sums = p.tick, [3]uint64{}
			p.order = append(p.order, g)
		}
		g.sums[0] += p.scan.B.Active
		g.sums[1] += p.scan.B.Inactive
		g.sums[2] += p.scan.B.Weight
	}
	if err := p.scan.Err(); err != nil {
		return fmt.Errorf("%s: %w", p.vs.Path(), err)
	}
	for _, g := range p.order {
		b.Add(g.active, float64(g.sums[0]))
		b.Add(g.inactive, float64(g.sums[1]))
		b.Add(g.weight, float64(g.sums[2]))
	}
	// Forget backends that went away, so a churning table (containers'
	// addresses) does not fill the bound; a steady one sweeps nothing.
	if len(p.groups) > len(p.order) {
		p.sweep()
	}
	return first
}

// sweep forgets the groups not seen this tick.
func (p *IPVS) sweep() {
	for k, g := range p.groups {
		if g.seen != p.tick {
			delete(p.groups, k)
		}
	}
}

// group returns the series of a backend, keyed by its selected labels in a
// binary form: addresses as 16 bytes (an IPv4 and its IPv4-mapped form are
// one label value, as net.IP prints them), ports as 2, names with their
// length. nil when the bound is reached.
func (p *IPVS) group(bk *Backend) *group {
	k := p.key[:0]
	if p.labels[lLocalAddr] {
		if bk.HasLocal {
			k = append(k, 1)
			k = append(k, bk.Local[:]...)
		} else {
			k = append(k, 0)
		}
	}
	if p.labels[lLocalPort] {
		k = append(k, byte(bk.LocalPort>>8), byte(bk.LocalPort))
	}
	if p.labels[lRemoteAddr] {
		k = append(k, bk.Remote[:]...)
	}
	if p.labels[lRemotePort] {
		k = append(k, byte(bk.RemotePort>>8), byte(bk.RemotePort))
	}
	if p.labels[lProto] {
		k = append(k, byte(len(bk.Proto)))
		k = append(k, bk.Proto...)
	}
	if p.labels[lMark] {
		k = append(k, byte(len(bk.Mark)))
		k = append(k, bk.Mark...)
	}
	p.key = k
	if g := p.groups[string(k)]; g != nil {
		return g
	}
	if len(p.groups) >= p.cfg.MaxBackends {
		// Make room from backends not seen yet this tick (gone, or
		// further down the table, which then get new series).
		p.sweep()
		if len(p.groups) >= p.cfg.MaxBackends {
			return nil
		}
	}
	g := p.newGroup(bk)
	p.groups[string(k)] = g
	return g
}

func (p *IPVS) newGroup(bk *Backend) *group {
	var vals [len(Labels)]string
	if bk.HasLocal {
		vals[lLocalAddr] = net.IP(bk.Local[:]).String()
	}
	vals[lLocalPort] = strconv.FormatUint(uint64(bk.LocalPort), 10)
	vals[lRemoteAddr] = net.IP(bk.Remote[:]).String()
	vals[lRemotePort] = strconv.FormatUint(uint64(bk.RemotePort), 10)
	vals[lProto] = string(bk.Proto)
	vals[lMark] = string(bk.Mark)
	// Label pairs sorted by name, as node_exporter writes them.
	var pairs []string
	for _, i := range [...]int{lLocalAddr, lMark, lLocalPort, lProto, lRemoteAddr, lRemotePort} {
		if p.labels[i] {
			pairs = append(pairs, Labels[i], vals[i])
		}
	}
	return &group{
		active: metric.NewDesc("node_ipvs_backend_connections_active",
			"The current active connections by local and remote address.", metric.Gauge, pairs...),
		inactive: metric.NewDesc("node_ipvs_backend_connections_inactive",
			"The current inactive connections by local and remote address.", metric.Gauge, pairs...),
		weight: metric.NewDesc("node_ipvs_backend_weight",
			"The current backend weight by local and remote address.", metric.Gauge, pairs...),
	}
}
