// Package timeplugin exports the system time, time zone and clock sources
// (node_exporter's time collector).
package timeplugin

import (
	"bytes"
	"context"
	_ "embed"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "time",
		Description:  "system time, time zone offset and clock sources",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Time{} },
		SampleConfig: sampleConfig,
	})
}

// maxSources bounds the clock sources listed per device (a kernel offers
// two to five).
const maxSources = 32

const (
	helpAvailable = "Available clocksources read from '/sys/devices/system/clocksource'."
	helpCurrent   = "Current clocksource read from '/sys/devices/system/clocksource'."
)

type device struct {
	id                 string // node_exporter's device label: the index in the sorted list
	idBytes            []byte
	available, current *kernfs.File
	prevAvailable      []byte
	availableDescs     []*metric.Desc
	currentDesc        *infodesc.Desc
}

// Time is the time plugin.
type Time struct {
	now      *metric.Desc
	zone     *metric.Desc
	zoneName string
	zoneOff  int
	devices  []*device
}

// Init lists the clock source devices under the root's sysfs; there are
// none in a container without /sys, which leaves the time series alone.
func (t *Time) Init(env sampler.Env) error {
	t.now = metric.NewDesc("node_time_seconds", "System time in seconds since epoch (1970).", metric.Gauge)
	dirs, _ := filepath.Glob(env.FS.Path("sys", "devices", "system", "clocksource", "clocksource[0-9]*"))
	sort.Slice(dirs, func(i, j int) bool { return devNum(dirs[i]) < devNum(dirs[j]) })
	for i, dir := range dirs {
		id := strconv.Itoa(i)
		d := &device{
			id:          id,
			idBytes:     []byte(id),
			available:   kernfs.NewFile(filepath.Join(dir, "available_clocksource"), 256),
			current:     kernfs.NewFile(filepath.Join(dir, "current_clocksource"), 256),
			currentDesc: infodesc.New("node_time_clocksource_current_info", helpCurrent, metric.Gauge, "device", "clocksource"),
		}
		// Attributes kept in memory by the kernel: raw reads (kernfs.File).
		d.available.NonBlocking, d.current.NonBlocking = true, true
		t.devices = append(t.devices, d)
	}
	return nil
}

func devNum(dir string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "clocksource"))
	return n
}

// Sample emits the tick's time, the local zone's offset and, per clock
// source device, what is available and what is in use.
func (t *Time) Sample(_ context.Context, now time.Time, b *metric.Batch) error {
	b.Add(t.now, float64(now.UnixNano())/1e9)
	name, off := now.In(time.Local).Zone()
	if t.zone == nil || name != t.zoneName || off != t.zoneOff {
		t.zone = metric.NewDesc("node_time_zone_offset_seconds", "System time zone offset in seconds.",
			metric.Gauge, "time_zone", name)
		t.zoneName, t.zoneOff = name, off
	}
	b.Add(t.zone, float64(off))
	var first error
	for _, d := range t.devices {
		if err := d.sample(b); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (d *device) sample(b *metric.Batch) error {
	data, err := d.available.Read()
	if err != nil {
		return err
	}
	if d.prevAvailable == nil || !bytes.Equal(data, d.prevAvailable) {
		d.prevAvailable = append(d.prevAvailable[:0], data...)
		d.availableDescs = d.availableDescs[:0]
		rest, _ := kernfs.NextLine(data)
		for len(rest) > 0 && len(d.availableDescs) < maxSources {
			var f []byte
			if f, rest = kernfs.NextField(rest); len(f) == 0 {
				break
			}
			d.availableDescs = append(d.availableDescs, metric.NewDesc("node_time_clocksource_available_info",
				helpAvailable, metric.Gauge, "device", d.id, "clocksource", string(infodesc.Clip(f))))
		}
	}
	for _, desc := range d.availableDescs {
		b.Add(desc, 1)
	}
	data, err = d.current.Read()
	if err != nil {
		return err
	}
	line, _ := kernfs.NextLine(data)
	cur, _ := kernfs.NextField(line)
	v := [2][]byte{d.idBytes, cur}
	b.Add(d.currentDesc.Get(v[:]), 1)
	return nil
}
