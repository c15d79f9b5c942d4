// Package netdev samples network interface counters (node_exporter's netdev
// collector): the sixteen columns of /proc/net/dev per interface, and the
// packets dropped for want of a protocol handler, which /proc/net/dev has
// no column for. On the live system (root "/") one netlink RTM_GETSTATS
// dump a tick gives all of them (netlink.go); with another root, or
// netlink = false, the plugin reads /proc/net/dev and each interface's
// sysfs statistics/rx_nohandler.
package netdev

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "netdev",
		Description:  "network interface counters (netlink, or /proc/net/dev)",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return &Config{MaxDevices: 1024, Netlink: true} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &Netdev{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.netdev] table.
type Config struct {
	sampler.Common
	// DeviceInclude keeps only interfaces matching one of these globs.
	DeviceInclude []string `toml:"device_include"`
	// DeviceExclude drops interfaces matching one of these globs.
	DeviceExclude []string `toml:"device_exclude"`
	// MaxDevices bounds the per-interface cache.
	MaxDevices int `toml:"max_devices"`
	// Netlink reads the counters with one netlink request a tick where
	// the root is "/"; false reads /proc/net/dev and sysfs instead.
	Netlink bool `toml:"netlink"`
}

// Validate checks the glob patterns and the cache bound.
func (c *Config) Validate() error {
	for _, list := range [2][]string{c.DeviceInclude, c.DeviceExclude} {
		for _, p := range list {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("device pattern %q: %w", p, err)
			}
		}
	}
	if c.MaxDevices < 1 {
		return fmt.Errorf("max_devices must be at least 1, got %d", c.MaxDevices)
	}
	return nil
}

// NumCols is the number of counters per interface in /proc/net/dev.
const NumCols = 16

// colNames are the /proc/net/dev header columns, receive then transmit;
// node_exporter names its metrics after them.
var colNames = [NumCols]string{
	"receive_bytes", "receive_packets", "receive_errs", "receive_drop",
	"receive_fifo", "receive_frame", "receive_compressed", "receive_multicast",
	"transmit_bytes", "transmit_packets", "transmit_errs", "transmit_drop",
	"transmit_fifo", "transmit_colls", "transmit_carrier", "transmit_compressed",
}

// forgetAfter is how many ticks an interface may be absent before its
// descriptors are dropped: long enough to survive a link flap without
// re-creating series, short enough that container veths do not pile up.
const forgetAfter = 64

type device struct {
	skip     bool // filtered out by the config
	lastSeen uint64
	ifindex  uint32 // netlink's key for it; 0 when read from /proc/net/dev
	descs    [NumCols]*metric.Desc
	// nohandler is statistics/rx_nohandler in sysfs; nil once it was
	// found missing (virtual devices of old kernels, fixtures without it).
	nohandler     *kernfs.File
	nohandlerDesc *metric.Desc
}

// Netdev is the netdev plugin.
type Netdev struct {
	cfg     Config
	fs      kernfs.FS
	file    *kernfs.File
	devices map[string]*device
	tick    uint64

	// The netlink source (netlink.go), used when useNetlink is set.
	useNetlink bool
	nl         *nlSocket // nil until opened, and after a failed dump
	resync     bool      // dump the links (names) before the next stats
	names      map[uint32]string
	byIndex    map[uint32]*device
	stats      [maxLinkStats]uint64
	batch      *metric.Batch // the batch of the Sample under way
	handle     func(nlMsg) error
}

// maxNames bounds the interface names kept from netlink; one more
// interface than this is an error, not unbounded memory.
const maxNames = 1 << 16

// Init validates the config and resolves the file under the root.
func (n *Netdev) Init(env sampler.Env) error {
	if err := n.cfg.Validate(); err != nil {
		return err
	}
	n.fs = env.FS
	n.file = kernfs.NewFile(env.FS.Path("proc", "net", "dev"), 8192)
	n.file.NonBlocking = true // a system-wide /proc file: raw reads (kernfs.File)
	n.devices = make(map[string]*device)
	if n.cfg.Netlink && env.FS.Root == "/" {
		nl, err := openNetlink()
		if err != nil {
			// Seccomp, or not Linux: the files give the same counters.
			if env.Logger != nil {
				env.Logger.Info("netdev: no netlink, reading /proc/net/dev and sysfs", "err", err)
			}
		} else {
			n.useNetlink, n.nl, n.resync = true, nl, true
			n.names = make(map[uint32]string)
			n.byIndex = make(map[uint32]*device)
			n.handle = n.handleMsg // built once: a method value per tick would allocate
		}
	}
	return nil
}

// Sample appends 16 counters per interface (and rx_nohandler where the
// kernel has it) from netlink or from /proc/net/dev.
func (n *Netdev) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if n.useNetlink {
		return n.sampleNetlink(b)
	}
	data, err := n.file.Read()
	if err != nil {
		return err
	}
	n.tick++
	err = Parse(data, func(name []byte, v [NumCols]uint64) {
		d := n.device(name)
		if d.skip {
			return
		}
		for i, desc := range d.descs {
			b.Add(desc, float64(v[i]))
		}
		if d.nohandler != nil {
			if x, ok := readCounter(d.nohandler); ok {
				b.Add(d.nohandlerDesc, float64(x))
			} else {
				d.nohandler.Close()
				d.nohandler = nil
			}
		}
	})
	n.forget()
	if err != nil {
		return fmt.Errorf("%s: %w", n.file.Path(), err)
	}
	return nil
}

// device returns the cached entry for name, creating it (and deciding the
// filter once) on first sight.
func (n *Netdev) device(name []byte) *device {
	if d, ok := n.devices[string(name)]; ok {
		d.lastSeen = n.tick
		return d
	}
	if len(n.devices) >= n.cfg.MaxDevices {
		n.evictOldest()
	}
	s := string(name)
	d := &device{lastSeen: n.tick, skip: !n.keep(s)}
	if !d.skip {
		for i, c := range colNames {
			d.descs[i] = metric.NewDesc("node_network_"+c+"_total",
				"Network device statistic "+c+".", metric.Counter, "device", s)
		}
		d.nohandlerDesc = metric.NewDesc("node_network_receive_nohandler_total",
			"Network device statistic receive_nohandler.", metric.Counter, "device", s)
		if !n.useNetlink && !strings.ContainsAny(s, "/") && s != "." && s != ".." {
			d.nohandler = kernfs.NewFile(n.fs.Path("sys", "class", "net", s, "statistics", "rx_nohandler"), 32)
			d.nohandler.NonBlocking = true // an in-memory sysfs attribute
		}
	}
	n.devices[s] = d
	return d
}

func (n *Netdev) keep(name string) bool {
	if len(n.cfg.DeviceInclude) > 0 && !matchAny(n.cfg.DeviceInclude, name) {
		return false
	}
	return !matchAny(n.cfg.DeviceExclude, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok { // patterns were validated in Init
			return true
		}
	}
	return false
}

func (n *Netdev) forget() {
	if n.tick%forgetAfter != 0 {
		return
	}
	for name, d := range n.devices {
		if n.tick-d.lastSeen >= forgetAfter {
			n.drop(name, d)
		}
	}
}

func (n *Netdev) drop(name string, d *device) {
	if d.nohandler != nil {
		d.nohandler.Close()
	}
	if d.ifindex != 0 && n.byIndex[d.ifindex] == d {
		delete(n.byIndex, d.ifindex)
	}
	delete(n.devices, name)
}

// readCounter reads one sysfs counter; false if it is missing or not a
// number (the device went away, or has no such attribute).
func readCounter(f *kernfs.File) (uint64, bool) {
	data, err := f.Read()
	if err != nil {
		return 0, false
	}
	line, _ := kernfs.NextLine(data)
	x, err := kernfs.ParseUint(kernfs.TrimSpace(line))
	return x, err == nil
}

func (n *Netdev) evictOldest() {
	var oldest string
	oldestSeen := ^uint64(0)
	for name, d := range n.devices {
		if d.lastSeen < oldestSeen {
			oldest, oldestSeen = name, d.lastSeen
		}
	}
	n.drop(oldest, n.devices[oldest])
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected /proc/net/dev format")

// Parse scans /proc/net/dev content in place and calls fn for every
// interface with its 16 counters. name is only valid during fn.
// Parsing stops at the first malformed line.
func Parse(data []byte, fn func(name []byte, v [NumCols]uint64)) error {
	_, rest := kernfs.NextLine(data) // "Inter-|   Receive ... |  Transmit"
	hdr, rest := kernfs.NextLine(rest)
	if err := checkHeader(hdr); err != nil {
		return err
	}
	var v [NumCols]uint64
	for lineNo := 3; len(rest) > 0; lineNo++ {
		var line []byte
		line, rest = kernfs.NextLine(rest)
		if len(kernfs.TrimSpace(line)) == 0 {
			continue
		}
		name, vals, ok := kernfs.Cut(line, ':')
		name = kernfs.TrimSpace(name)
		if !ok || len(name) == 0 {
			return fmt.Errorf("%w: line %d: no \"interface:\" prefix", ErrFormat, lineNo)
		}
		for i := range v {
			var f []byte
			f, vals = kernfs.NextField(vals)
			if len(f) == 0 {
				return fmt.Errorf("%w: line %d (%q): %d counters, want %d", ErrFormat, lineNo, name, i, NumCols)
			}
			x, err := kernfs.ParseUint(f)
			if err != nil {
				return fmt.Errorf("%w: line %d (%q): counter %s %q: %w", ErrFormat, lineNo, name, colNames[i], f, err)
			}
			v[i] = x
		}
		if f, _ := kernfs.NextField(vals); len(f) > 0 {
			return fmt.Errorf("%w: line %d (%q): more than %d counters", ErrFormat, lineNo, name, NumCols)
		}
		fn(name, v)
	}
	return nil
}

// checkHeader verifies the column names of the second header line, so a
// kernel that changes the layout gives an error instead of wrong numbers.
func checkHeader(hdr []byte) error {
	_, cols, ok := kernfs.Cut(hdr, '|')
	if !ok {
		return fmt.Errorf("%w: header %q", ErrFormat, hdr)
	}
	rx, tx, ok := kernfs.Cut(cols, '|')
	if !ok {
		return fmt.Errorf("%w: header %q", ErrFormat, hdr)
	}
	for p, part := range [2][]byte{rx, tx} {
		want := colNames[p*NumCols/2 : (p+1)*NumCols/2]
		i := 0
		for {
			var f []byte
			f, part = kernfs.NextField(part)
			if len(f) == 0 {
				break
			}
			if i >= len(want) {
				return fmt.Errorf("%w: header has more than %d %s columns", ErrFormat, len(want), direction[p])
			}
			// colNames are "receive_bytes" etc.; the header says "bytes".
			if _, col, _ := strings.Cut(want[i], "_"); col != string(f) {
				return fmt.Errorf("%w: header %s column %d is %q, want %q", ErrFormat, direction[p], i+1, f, col)
			}
			i++
		}
		if i != len(want) {
			return fmt.Errorf("%w: header has %d %s columns, want %d", ErrFormat, i, direction[p], len(want))
		}
	}
	return nil
}

var direction = [2]string{"receive", "transmit"}
