// Package netclass samples /sys/class/net/<iface>/ (node_exporter's
// netclass collector): link state, speed, MTU, carrier changes, addresses.
package netclass

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval is longer than the sampler's: the attributes change
// rarely, and reading speed or duplex calls into the NIC driver under the
// kernel's network configuration lock (node_exporter reads them once per
// scrape, typically every 15 s).
const DefaultInterval = 10 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "netclass",
		Description: "link state, speed and MTU from /sys/class/net",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			c := &Config{IgnoredDevices: "^$", MaxDevices: 1024}
			c.Interval = sampler.Duration(DefaultInterval)
			return c
		},
		New:          func(c sampler.Configurable) sampler.Plugin { return &Netclass{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.netclass] table.
type Config struct {
	sampler.Common
	// IgnoredDevices is node_exporter's --collector.netclass.ignored-devices.
	IgnoredDevices string `toml:"ignored_devices"`
	// IgnoreInvalidSpeed drops speed_bytes when the kernel reports -1.
	IgnoreInvalidSpeed bool `toml:"ignore_invalid_speed"`
	// MaxDevices bounds the interfaces followed.
	MaxDevices int `toml:"max_devices"`
}

// Validate checks the pattern and the bound.
func (c *Config) Validate() error {
	if _, err := regexp.Compile(c.IgnoredDevices); err != nil {
		return fmt.Errorf("ignored_devices: %w", err)
	}
	if c.MaxDevices < 1 {
		return fmt.Errorf("max_devices must be at least 1, got %d", c.MaxDevices)
	}
	return nil
}

// Numeric attributes: file name and node_network_<metric>.
var numeric = [...]struct {
	file, name string
	typ        metric.Type
}{
	{"addr_assign_type", "address_assign_type", metric.Gauge},
	{"carrier", "carrier", metric.Gauge},
	{"carrier_changes", "carrier_changes_total", metric.Counter},
	{"carrier_up_count", "carrier_up_changes_total", metric.Counter},
	{"carrier_down_count", "carrier_down_changes_total", metric.Counter},
	{"dev_id", "device_id", metric.Gauge},
	{"dormant", "dormant", metric.Gauge},
	{"flags", "flags", metric.Gauge},
	{"ifindex", "iface_id", metric.Gauge},
	{"iflink", "iface_link", metric.Gauge},
	{"link_mode", "iface_link_mode", metric.Gauge},
	{"mtu", "mtu_bytes", metric.Gauge},
	{"name_assign_type", "name_assign_type", metric.Gauge},
	{"netdev_group", "net_dev_group", metric.Gauge},
	{"speed", "speed_bytes", metric.Gauge},
	{"tx_queue_len", "transmit_queue_length", metric.Gauge},
	{"type", "protocol_type", metric.Gauge},
}

const speedIdx = 14

// Text attributes, in node_network_info's label order after "device".
var text = [...]string{"address", "broadcast", "duplex", "operstate", "ifalias"}

const operstateIdx = 3

type attr struct {
	f      *kernfs.File
	absent bool // no such file for this device
}

type device struct {
	name     string
	seen     uint64
	num      [len(numeric)]attr
	txt      [len(text)]attr
	numDescs [len(numeric)]*metric.Desc
	up       *metric.Desc
	info     *infodesc.Desc
	vals     [1 + len(text)][]byte
	owned    [len(text)][]byte // text values copied out of the file buffers
}

// Netclass is the netclass plugin.
type Netclass struct {
	cfg     Config
	ignore  *regexp.Regexp
	root    string
	dir     *kernfs.Dir
	devices map[string]*device
	tick    uint64
	err     error
	full    bool // MaxDevices reached (reported once)
}

// Init resolves /sys/class/net under the root.
func (n *Netclass) Init(env sampler.Env) error {
	if err := n.cfg.Validate(); err != nil {
		return err
	}
	n.ignore = regexp.MustCompile(n.cfg.IgnoredDevices)
	n.root = env.FS.Path("sys", "class", "net")
	n.dir = kernfs.NewDir(n.root)
	n.devices = map[string]*device{}
	return nil
}

// Sample lists the interfaces and reads each one's attributes. An
// attribute the driver refuses (speed of a link that is down: EINVAL) is
// left out for that tick, as node_exporter does.
func (n *Netclass) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	ents, err := n.dir.List()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return sampler.ErrNotAvailable
		}
		return err
	}
	n.tick++
	n.err = nil
	for _, e := range ents {
		if e.Type == kernfs.DTReg { // bonding_masters
			continue
		}
		d := n.device(e.Name)
		if d == nil {
			continue
		}
		d.seen = n.tick
		n.sample(d, b)
	}
	for name, d := range n.devices {
		if d.seen != n.tick {
			delete(n.devices, name) // gone: its descriptors go with it
		}
	}
	return n.err
}

func (n *Netclass) device(name []byte) *device {
	if d, ok := n.devices[string(name)]; ok {
		return d
	}
	// Ignored interfaces are matched again each tick rather than
	// remembered, so thousands of ignored veths take no memory.
	if n.ignore.Match(name) || !validDevice(name) {
		return nil
	}
	s := string(name)
	if len(n.devices) >= n.cfg.MaxDevices {
		if !n.full {
			n.full = true
			n.err = fmt.Errorf("more than max_devices = %d interfaces; ignoring %s and later ones", n.cfg.MaxDevices, s)
		}
		return nil
	}
	d := &device{name: s}
	dir := filepath.Join(n.root, s)
	// Attributes kept in the net device are read raw (kernfs.File); speed
	// and duplex ask the driver, which may sleep, so they are read normally.
	for i, a := range numeric {
		d.num[i].f = kernfs.NewFile(filepath.Join(dir, a.file), 64)
		d.num[i].f.NonBlocking = i != speedIdx
		d.numDescs[i] = metric.NewDesc("node_network_"+a.name, "Network device property: "+a.name, a.typ, "device", s)
	}
	for i, a := range text {
		d.txt[i].f = kernfs.NewFile(filepath.Join(dir, a), 256)
		d.txt[i].f.NonBlocking = a != "duplex"
	}
	d.up = metric.NewDesc("node_network_up", "Value is 1 if operstate is 'up', 0 otherwise.", metric.Gauge, "device", s)
	d.info = infodesc.New("node_network_info", "Non-numeric data from /sys/class/net/<iface>, value is always 1.",
		metric.Gauge, "device", "address", "broadcast", "duplex", "operstate", "ifalias")
	d.vals[0] = []byte(s)
	n.devices[s] = d
	return d
}

// validDevice: interface names are at most 15 bytes with no '/' (the
// kernel's rule); anything else is not a device directory.
func validDevice(s []byte) bool {
	return len(s) > 0 && len(s) <= 15 && !bytes.ContainsAny(s, "/\x00")
}

// read returns an attribute's first line, nil if it has none this tick.
func (n *Netclass) read(a *attr) []byte {
	if a.absent {
		return nil
	}
	data, err := a.f.Read()
	if err != nil {
		a.absent = errors.Is(err, fs.ErrNotExist)
		return nil // EINVAL and the like: the driver has no value now
	}
	line, _ := kernfs.NextLine(data)
	return line
}

func (n *Netclass) sample(d *device, b *metric.Batch) {
	for i := range text {
		v := n.read(&d.txt[i])
		d.owned[i] = append(d.owned[i][:0], v...)
		d.vals[1+i] = d.owned[i]
	}
	up := 0.0
	if string(d.vals[1+operstateIdx]) == "up" {
		up = 1
	}
	b.Add(d.up, up)
	b.Add(d.info.Get(d.vals[:]), 1)
	for i := range numeric {
		line := n.read(&d.num[i])
		if line == nil {
			continue
		}
		v, err := ParseNumber(line)
		if err != nil {
			if n.err == nil {
				n.err = fmt.Errorf("%s: %w", d.num[i].f.Path(), err)
			}
			continue
		}
		if i == speedIdx {
			if v < 0 && n.cfg.IgnoreInvalidSpeed {
				continue
			}
			v = v * 1000 * 1000 / 8 // Mbit/s to bytes/s
		}
		b.Add(d.numDescs[i], float64(v))
	}
}

// ParseNumber reads a decimal or 0x-prefixed hex attribute (flags, dev_id).
func ParseNumber(b []byte) (int64, error) {
	b = kernfs.TrimSpace(b)
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		var x int64
		if len(b) > 18 {
			return 0, fmt.Errorf("%q: hex too long", b[:18])
		}
		for _, c := range b[2:] {
			switch {
			case c >= '0' && c <= '9':
				c -= '0'
			case c >= 'a' && c <= 'f':
				c -= 'a' - 10
			case c >= 'A' && c <= 'F':
				c -= 'A' - 10
			default:
				return 0, fmt.Errorf("%q: want a hex number", clip(b))
			}
			x = x<<4 | int64(c)
		}
		return x, nil
	}
	v, err := kernfs.ParseInt(b)
	if err != nil {
		return 0, fmt.Errorf("%q: want an integer", clip(b))
	}
	return v, nil
}

func clip(b []byte) []byte {
	if len(b) > 24 {
		return b[:24]
	}
	return b
}
