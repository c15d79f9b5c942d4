// Package diskstats samples /proc/diskstats (node_exporter's diskstats
// collector): I/O counters per whole block device.
package diskstats

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

// DefaultExclude is node_exporter 1.5's default: partitions, RAM disks,
// loop and floppy devices.
const DefaultExclude = `^(ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$`

func init() {
	sampler.Register(sampler.Registration{
		Name:         "diskstats",
		Description:  "block device I/O counters from /proc/diskstats",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return &Config{DeviceExclude: DefaultExclude, MaxDevices: 1024} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &Diskstats{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.diskstats] table.
type Config struct {
	sampler.Common
	// DeviceInclude, if set, keeps only devices whose name matches.
	DeviceInclude string `toml:"device_include"`
	// DeviceExclude drops devices whose name matches.
	DeviceExclude string `toml:"device_exclude"`
	// MaxDevices bounds the per-device cache.
	MaxDevices int `toml:"max_devices"`
}

// Validate compiles the expressions and checks the cache bound.
func (c *Config) Validate() error {
	_, _, err := c.compile()
	if err == nil && c.MaxDevices < 1 {
		err = fmt.Errorf("max_devices must be at least 1, got %d", c.MaxDevices)
	}
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

// NumStats is the number of counters node_exporter exports per device
// (kernel 5.5 and later write 17; older kernels 11 or 15).
const NumStats = 17

// MinStats is the fewest counters a line may have: kernels before 2.6.25
// wrote 4 for partitions, and node_exporter (via procfs) skips such lines.
const MinStats = 11

// series describes how node_exporter names and scales each column.
var series = [NumStats]struct {
	name, help string
	typ        metric.Type
	scale      float64
}{
	{"node_disk_reads_completed_total", "The total number of reads completed successfully.", metric.Counter, 1},
	{"node_disk_reads_merged_total", "The total number of reads merged.", metric.Counter, 1},
	{"node_disk_read_bytes_total", "The total number of bytes read successfully.", metric.Counter, sectorSize},
	{"node_disk_read_time_seconds_total", "The total number of seconds spent by all reads.", metric.Counter, msToSeconds},
	{"node_disk_writes_completed_total", "The total number of writes completed successfully.", metric.Counter, 1},
	{"node_disk_writes_merged_total", "The number of writes merged.", metric.Counter, 1},
	{"node_disk_written_bytes_total", "The total number of bytes written successfully.", metric.Counter, sectorSize},
	{"node_disk_write_time_seconds_total", "This is the total number of seconds spent by all writes.", metric.Counter, msToSeconds},
	{"node_disk_io_now", "The number of I/Os currently in progress.", metric.Gauge, 1},
	{"node_disk_io_time_seconds_total", "Total seconds spent doing I/Os.", metric.Counter, msToSeconds},
	{"node_disk_io_time_weighted_seconds_total", "The weighted # of seconds spent doing I/Os.", metric.Counter, msToSeconds},
	{"node_disk_discards_completed_total", "The total number of discards completed successfully.", metric.Counter, 1},
	{"node_disk_discards_merged_total", "The total number of discards merged.", metric.Counter, 1},
	// Sectors, not bytes: node_exporter exports this one unscaled.
	{"node_disk_discarded_sectors_total", "The total number of sectors discarded successfully.", metric.Counter, 1},
	{"node_disk_discard_time_seconds_total", "This is the total number of seconds spent by all discards.", metric.Counter, msToSeconds},
	{"node_disk_flush_requests_total", "The total number of flush requests completed successfully", metric.Counter, 1},
	{"node_disk_flush_requests_time_seconds_total", "This is the total number of seconds spent by all flush requests.", metric.Counter, msToSeconds},
}

const (
	// sectorSize: the kernel counts in 512-byte units whatever the
	// device's real sector size (Documentation/admin-guide/iostats.rst).
	sectorSize  = 512
	msToSeconds = 1.0 / 1000
)

// forgetAfter is how many ticks a device may be absent before its entry is
// dropped (hot-plugged disks, short-lived dm and loop devices).
const forgetAfter = 64

type device struct {
	skip     bool
	lastSeen uint64
	descs    [NumStats]*metric.Desc
}

// Diskstats is the diskstats plugin.
type Diskstats struct {
	cfg              Config
	include, exclude *regexp.Regexp
	file             *kernfs.File
	devices          map[string]*device
	tick             uint64
}

// Init compiles the filters and resolves the file under the root.
func (d *Diskstats) Init(env sampler.Env) error {
	if err := d.cfg.Validate(); err != nil {
		return err
	}
	d.include, d.exclude, _ = d.cfg.compile()
	d.file = kernfs.NewFile(env.FS.Path("proc", "diskstats"), 8192)
	d.file.NonBlocking = true // a system-wide /proc file: raw reads (kernfs.File)
	d.devices = make(map[string]*device)
	return nil
}

// Sample reads /proc/diskstats once and appends the counters of every
// device that passes the filters.
func (d *Diskstats) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := d.file.Read()
	if err != nil {
		return err
	}
	d.tick++
	err = Parse(data, func(name []byte, v [NumStats]uint64, n int) {
		dev := d.device(name)
		if dev.skip {
			return
		}
		for i := range n {
			b.Add(dev.descs[i], float64(v[i])*series[i].scale)
		}
	})
	d.forget()
	if err != nil {
		return fmt.Errorf("%s: %w", d.file.Path(), err)
	}
	return nil
}

// device returns the cache entry of name; the filter regexps run only when
// a name is first seen.
func (d *Diskstats) device(name []byte) *device {
	if dev, ok := d.devices[string(name)]; ok {
		dev.lastSeen = d.tick
		return dev
	}
	if len(d.devices) >= d.cfg.MaxDevices {
		d.evictOldest()
	}
	s := string(name)
	dev := &device{lastSeen: d.tick}
	dev.skip = (d.include != nil && !d.include.MatchString(s)) || (d.exclude != nil && d.exclude.MatchString(s))
	if !dev.skip {
		for i, m := range series {
			dev.descs[i] = metric.NewDesc(m.name, m.help, m.typ, "device", s)
		}
	}
	d.devices[s] = dev
	return dev
}

func (d *Diskstats) forget() {
	if d.tick%forgetAfter != 0 {
		return
	}
	for name, dev := range d.devices {
		if d.tick-dev.lastSeen >= forgetAfter {
			delete(d.devices, name)
		}
	}
}

func (d *Diskstats) evictOldest() {
	var oldest string
	oldestSeen := ^uint64(0)
	for name, dev := range d.devices {
		if dev.lastSeen < oldestSeen {
			oldest, oldestSeen = name, dev.lastSeen
		}
	}
	delete(d.devices, oldest)
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected /proc/diskstats format")

// Parse scans /proc/diskstats content in place. For every device line with
// at least MinStats counters it calls fn with the name, the first
// min(count, NumStats) counters in v and that count in n; name is only
// valid during fn. Lines with fewer counters are skipped, as node_exporter
// does; extra counters of future kernels are ignored. Parsing stops at the
// first malformed line.
func Parse(data []byte, fn func(name []byte, v [NumStats]uint64, n int)) error {
	var v [NumStats]uint64
	for lineNo := 1; len(data) > 0; lineNo++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		major, rest := kernfs.NextField(line)
		if len(major) == 0 {
			continue // blank line
		}
		minor, rest := kernfs.NextField(rest)
		name, rest := kernfs.NextField(rest)
		if len(name) == 0 {
			return fmt.Errorf("%w: line %d: want \"major minor name counters...\"", ErrFormat, lineNo)
		}
		for _, f := range [2][]byte{major, minor} {
			if _, err := kernfs.ParseUint(f); err != nil {
				return fmt.Errorf("%w: line %d: device number %q: %w", ErrFormat, lineNo, f, err)
			}
		}
		n := 0
		for ; ; n++ {
			var f []byte
			f, rest = kernfs.NextField(rest)
			if len(f) == 0 {
				break
			}
			x, err := kernfs.ParseUint(f)
			if err != nil {
				return fmt.Errorf("%w: line %d (%q): counter %d %q: %w", ErrFormat, lineNo, name, n+1, f, err)
			}
			if n < NumStats {
				v[n] = x
			}
		}
		if n < MinStats {
			continue
		}
		fn(name, v, min(n, NumStats))
	}
	return nil
}
