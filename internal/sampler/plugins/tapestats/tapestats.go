// Package tapestats samples SCSI tape drive statistics from
// /sys/class/scsi_tape/stN/stats (node_exporter's tapestats collector).
package tapestats

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "tapestats",
		Description:  "SCSI tape drive statistics from /sys/class/scsi_tape",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return &Config{IgnoredDevices: "^$"} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &Tapestats{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.tapestats] table.
type Config struct {
	sampler.Common
	// IgnoredDevices drops drives whose name matches (node_exporter's
	// --collector.tapestats.ignored-devices).
	IgnoredDevices string `toml:"ignored_devices"`
}

// Validate compiles the expression.
func (c *Config) Validate() error {
	if _, err := regexp.Compile(c.IgnoredDevices); err != nil {
		return fmt.Errorf("ignored_devices: %w", err)
	}
	return nil
}

// Stats maps the files of stats/ to metrics; ns values are scaled to
// seconds by multiplying by 1e-9, as upstream does.
var Stats = [...]struct {
	File, Name, Help string
	Type             metric.Type
	NS               bool
}{
	{"in_flight", "io_now", "The number of I/Os currently outstanding to this device.", metric.Gauge, false},
	{"io_ns", "io_time_seconds_total", "The amount of time spent waiting for all I/O to complete (including read and write). This includes tape movement commands such as seeking between file or set marks and implicit tape movement such as when rewind on close tape devices are used.", metric.Counter, true},
	{"other_cnt", "io_others_total", "The number of I/Os issued to the tape drive other than read or write commands. The time taken to complete these commands uses the following calculation io_time_seconds_total-read_time_seconds_total-write_time_seconds_total", metric.Counter, false},
	{"read_byte_cnt", "read_bytes_total", "The number of bytes read from the tape drive.", metric.Counter, false},
	{"read_cnt", "reads_completed_total", "The number of read requests issued to the tape drive.", metric.Counter, false},
	{"read_ns", "read_time_seconds_total", "The amount of time spent waiting for read requests to complete.", metric.Counter, true},
	{"resid_cnt", "residual_total", "The number of times during a read or write we found the residual amount to be non-zero. This should mean that a program is issuing a read larger thean the block size on tape. For write not all data made it to tape.", metric.Counter, false},
	{"write_byte_cnt", "written_bytes_total", "The number of bytes written to the tape drive.", metric.Counter, false},
	{"write_cnt", "writes_completed_total", "The number of write requests issued to the tape drive.", metric.Counter, false},
	{"write_ns", "write_time_seconds_total", "The amount of time spent waiting for write requests to complete.", metric.Counter, true},
}

type tape struct {
	attrs [len(Stats)]*sysattr.Attr // nil: no such file, reads as 0 as upstream
	descs [len(Stats)]*metric.Desc
}

// Tapestats is the tapestats plugin.
type Tapestats struct {
	cfg   Config
	tapes []*tape
}

// isTape matches procfs's ^st\d+$ (not the nst or st0l/m/a mode nodes).
func isTape(name string) bool {
	if len(name) < 3 || name[:2] != "st" {
		return false
	}
	for _, c := range name[2:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Init lists the tape drives that ignored_devices does not drop (found at
// boot or on hotplug, which a restart picks up).
func (t *Tapestats) Init(env sampler.Env) error {
	if err := t.cfg.Validate(); err != nil {
		return err
	}
	ignore := regexp.MustCompile(t.cfg.IgnoredDevices)
	dir := env.FS.Path("sys", "class", "scsi_tape")
	for _, name := range sysattr.Devices(dir) {
		if !isTape(name) || ignore.MatchString(name) {
			continue
		}
		tp := &tape{}
		for i, s := range Stats {
			tp.attrs[i] = sysattr.Open(filepath.Join(dir, name, "stats"), s.File)
			tp.descs[i] = metric.NewDesc("node_tape_"+s.Name, s.Help, s.Type, "device", name)
		}
		t.tapes = append(t.tapes, tp)
	}
	if len(t.tapes) == 0 {
		return sampler.ErrNotAvailable
	}
	return nil
}

// Sample reads every drive's counters; a malformed value is an error
// naming the file and leaves that drive out of the tick.
func (t *Tapestats) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var first error
	var vals [len(Stats)]uint64
tapes:
	for _, tp := range t.tapes {
		for i, a := range tp.attrs {
			vals[i] = 0
			if a == nil {
				continue
			}
			raw, err := a.Read()
			if err == nil {
				v, ok := sysattr.ParseInt(raw)
				if ok && v >= 0 {
					vals[i] = uint64(v)
					continue
				}
				err = fmt.Errorf("%s: %q is not a count", a.Path(), raw)
			}
			if first == nil {
				first = err
			}
			continue tapes
		}
		for i, s := range Stats {
			v := float64(vals[i])
			if s.NS {
				v *= 0.000000001
			}
			b.Add(tp.descs[i], v)
		}
	}
	return first
}
