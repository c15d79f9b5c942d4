// Package arp counts ARP table entries per device from /proc/net/arp
// (node_exporter's arp collector, without netlink).
package arp

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "arp",
		Description:  "ARP entries per device from /proc/net/arp",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return &Config{} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &ARP{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.arp] table.
type Config struct {
	sampler.Common
	// DeviceInclude, if set, keeps only devices whose name matches
	// (node_exporter's --collector.arp.device-include).
	DeviceInclude string `toml:"device_include"`
	// DeviceExclude drops devices whose name matches
	// (--collector.arp.device-exclude).
	DeviceExclude string `toml:"device_exclude"`
}

// Validate compiles the expressions.
func (c *Config) Validate() error {
	_, _, err := c.compile()
	return err
}

func (c *Config) compile() (include, exclude *regexp.Regexp, err error) {
	if c.DeviceInclude != "" {
		if include, err = regexp.Compile(c.DeviceInclude); err != nil {
			return nil, nil, fmt.Errorf("device_include: %w", err)
		}
	}
	if c.DeviceExclude != "" {
		if exclude, err = regexp.Compile(c.DeviceExclude); err != nil {
			return nil, nil, fmt.Errorf("device_exclude: %w", err)
		}
	}
	return include, exclude, nil
}

// MaxDevices bounds the devices followed.
const MaxDevices = 4096

type device struct {
	desc  *metric.Desc
	count int
	seen  uint64
}

// ARP is the arp plugin.
type ARP struct {
	cfg              Config
	include, exclude *regexp.Regexp
	file             *kernfs.File
	byDev            map[string]*device
	order            []*device // devices of this tick, in order of first entry
	tick             uint64
}

// Init resolves /proc/net/arp under the root.
func (a *ARP) Init(env sampler.Env) error {
	var err error
	if a.include, a.exclude, err = a.cfg.compile(); err != nil {
		return err
	}
	a.file = kernfs.NewFile(env.FS.Path("proc", "net", "arp"), 8192)
	a.file.NonBlocking = true // generated from the neighbour table in memory
	a.byDev = map[string]*device{}
	return nil
}

// ErrFormat is wrapped by parse errors.
var ErrFormat = errors.New("unexpected ARP table format")

// Sample counts the lines per device (the last column); the header line
// starts with "IP". A line with fewer than six columns fails the tick, as
// upstream. Devices the filters drop are left out.
func (a *ARP) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := a.file.Read()
	if err != nil {
		return err
	}
	a.tick++
	a.order = a.order[:0]
	var first error
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		var f [6][]byte
		k := kernfs.Fields(line, f[:])
		if k < 6 {
			return fmt.Errorf("%s: line %d: %d columns: %w", a.file.Path(), n, k, ErrFormat)
		}
		if string(f[0]) == "IP" {
			continue
		}
		dev := lastField(line)
		d := a.byDev[string(dev)]
		if d == nil {
			// Filtered devices are matched again on every line rather
			// than remembered, so they take no place under MaxDevices.
			if a.include != nil && !a.include.Match(dev) || a.exclude != nil && a.exclude.Match(dev) {
				continue
			}
			if len(a.byDev) >= MaxDevices {
				if first == nil {
					first = fmt.Errorf("%s: more than %d devices", a.file.Path(), MaxDevices)
				}
				continue
			}
			d = &device{desc: metric.NewDesc("node_arp_entries", "ARP entries by device", metric.Gauge, "device", string(dev))}
			a.byDev[string(dev)] = d
		}
		if d.seen != a.tick {
			d.seen, d.count = a.tick, 0
			a.order = append(a.order, d)
		}
		d.count++
	}
	for _, d := range a.order {
		b.Add(d.desc, float64(d.count))
	}
	return first
}

func lastField(line []byte) []byte {
	line = kernfs.TrimSpace(line)
	i := len(line)
	for i > 0 && line[i-1] != ' ' && line[i-1] != '\t' {
		i--
	}
	return line[i:]
}
