// Package netstat samples /proc/net/netstat, /proc/net/snmp and
// /proc/net/snmp6 (node_exporter's netstat collector): protocol counters
// as node_netstat_<Proto>_<Field>, filtered by a regular expression.
package netstat

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

// DefaultFields is node_exporter's default --collector.netstat.fields.
const DefaultFields = `^(.*_(InErrors|InErrs)|Ip_Forwarding|Ip(6|Ext)_(InOctets|OutOctets)|Icmp6?_(InMsgs|OutMsgs)|TcpExt_(Listen.*|Syncookies.*|TCPSynRetrans|TCPTimeouts|TCPOFOQueue|TCPRcvQDrop)|Tcp_(ActiveOpens|InSegs|OutSegs|OutRsts|PassiveOpens|RetransSegs|CurrEstab)|Udp6?_(InDatagrams|OutDatagrams|NoPorts|RcvbufErrors|SndbufErrors))$`

func init() {
	sampler.Register(sampler.Registration{
		Name:         "netstat",
		Description:  "protocol counters from /proc/net/{netstat,snmp,snmp6}",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return &Config{Fields: DefaultFields} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &Netstat{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.netstat] table.
type Config struct {
	sampler.Common
	// Fields selects "Proto_Field" names (Go regexp syntax).
	Fields string `toml:"fields"`
}

// Validate compiles the field pattern.
func (c *Config) Validate() error {
	if _, err := regexp.Compile(c.Fields); err != nil {
		return fmt.Errorf("fields: %w", err)
	}
	return nil
}

// MaxSeries bounds the distinct field names remembered (a 6.x kernel has
// about 400 across the three files).
const MaxSeries = 4096

// pairCache remembers one header line of netstat/snmp and the descriptor
// of each of its fields (nil: filtered out).
type pairCache struct {
	header []byte
	descs  []*series
}

type pairFile struct {
	file   *kernfs.File
	absent bool
	pairs  []pairCache
}

// Netstat is the netstat plugin.
type Netstat struct {
	cfg    Config
	re     *regexp.Regexp
	files  [2]pairFile // netstat, snmp
	snmp6  *kernfs.File
	no6    bool // snmp6 absent (IPv6 disabled)
	lines6 kernfs.LineCache[*series]
	names  [][]byte
	vals   [][]byte
	byKey  map[string]*series
	b      *metric.Batch
	err    error
	tick   uint64
	found  int // files read this tick
}

// Init compiles the filter and resolves the files under the root.
func (n *Netstat) Init(env sampler.Env) error {
	if err := n.cfg.Validate(); err != nil {
		return err
	}
	n.re = regexp.MustCompile(n.cfg.Fields)
	for i, name := range [2]string{"netstat", "snmp"} {
		n.files[i].file = kernfs.NewFile(env.FS.Path("proc", "net", name), 8192)
		n.files[i].file.NonBlocking = true
	}
	n.snmp6 = kernfs.NewFile(env.FS.Path("proc", "net", "snmp6"), 8192)
	n.snmp6.NonBlocking = true
	n.byKey = map[string]*series{}
	n.names = make([][]byte, 0, maxFields)
	n.vals = make([][]byte, 0, maxFields)
	return nil
}

// retryAbsentEvery ticks a missing file is looked for again.
const retryAbsentEvery = 64

// read returns a file's content; a missing file (snmp6 with IPv6 off) is
// skipped, and looked for again only every retryAbsentEvery ticks.
func (n *Netstat) read(f *kernfs.File, absent *bool) []byte {
	if *absent && n.tick%retryAbsentEvery != 0 {
		return nil
	}
	data, err := f.Read()
	*absent = errors.Is(err, fs.ErrNotExist)
	if err != nil {
		if !*absent {
			n.keep(err)
		}
		return nil
	}
	n.found++
	return data
}

// Sample reads the three files.
func (n *Netstat) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	n.tick++
	n.b, n.err, n.found = b, nil, 0
	defer func() { n.b = nil }()
	for i := range n.files {
		f := &n.files[i]
		data := n.read(f.file, &f.absent)
		if data == nil {
			continue
		}
		if err := ParsePairs(data, n.names, n.vals, func(pair int, hdr, proto []byte, names, vals [][]byte) {
			n.pair(f, pair, hdr, proto, names, vals)
		}); err != nil {
			n.keep(fmt.Errorf("%s: %w", f.file.Path(), err))
		}
	}
	if data := n.read(n.snmp6, &n.no6); data != nil {
		if err := ParseSNMP6(data, n.snmp6Line); err != nil {
			n.keep(fmt.Errorf("%s: %w", n.snmp6.Path(), err))
		}
	}
	if n.found == 0 && n.err == nil {
		return sampler.ErrNotAvailable
	}
	return n.err
}

func (n *Netstat) keep(err error) {
	if n.err == nil {
		n.err = err
	}
}

func (n *Netstat) pair(f *pairFile, pair int, hdr, proto []byte, names, vals [][]byte) {
	for len(f.pairs) <= pair {
		f.pairs = append(f.pairs, pairCache{})
	}
	pc := &f.pairs[pair]
	if pc.header == nil || !bytes.Equal(pc.header, hdr) {
		pc.header = append(pc.header[:0], hdr...)
		pc.descs = pc.descs[:0]
		for _, name := range names {
			pc.descs = append(pc.descs, n.newDesc(proto, name))
		}
	}
	for i, d := range pc.descs {
		if d == nil || !n.once(d, names[i]) {
			continue
		}
		v, err := ParseValue(vals[i])
		if err != nil {
			n.keep(fmt.Errorf("%s %s: %w", proto, names[i], err))
			continue
		}
		n.b.Add(d.d, v)
	}
}

func (n *Netstat) snmp6Line(i int, name, val []byte) {
	d, ok := n.lines6.Get(i, name)
	if !ok {
		if proto, field, found := SplitSNMP6(name); found {
			d = n.newDesc(proto, field)
		}
		n.lines6.Put(i, name, d)
	}
	if d == nil || !n.once(d, name) {
		return
	}
	v, err := ParseValue(val)
	if err != nil {
		n.keep(fmt.Errorf("%s: %w", name, err))
		return
	}
	n.b.Add(d.d, v)
}

// series is one exported field; the same key seen twice in a tick (a
// hostile or corrupt file) is exported once.
type series struct {
	d    *metric.Desc
	seen uint64 // tick that last emitted it
}

// once reports whether s may be emitted this tick, and marks it.
func (n *Netstat) once(s *series, name []byte) bool {
	if s.seen == n.tick {
		n.keep(fmt.Errorf("field %s listed twice: %w", name, ErrFormat))
		return false
	}
	s.seen = n.tick
	return true
}

// newDesc returns the series of a selected field, nil for others (and for
// names that cannot be metric names, or beyond MaxSeries). A key met again
// (after a header change) keeps its series.
func (n *Netstat) newDesc(proto, field []byte) *series {
	key := string(proto) + "_" + string(field)
	if s, ok := n.byKey[key]; ok {
		return s
	}
	if !validName(key) || !n.re.MatchString(key) {
		return nil
	}
	if len(n.byKey) >= MaxSeries {
		n.keep(fmt.Errorf("more than %d fields, ignoring %s", MaxSeries, key))
		return nil
	}
	s := &series{d: metric.NewDesc("node_netstat_"+key, "Statistic "+string(proto)+string(field)+".", metric.Untyped)}
	n.byKey[key] = s
	return s
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}
