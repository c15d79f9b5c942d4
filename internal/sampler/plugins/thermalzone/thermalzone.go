// Package thermalzone samples /sys/class/thermal (node_exporter's
// thermal_zone collector): zone temperatures and cooling device states.
package thermalzone

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval is longer than the sampler's: an ACPI thermal zone's
// temperature is read by running firmware code, which can take
// milliseconds and disturb the node; temperatures move slowly.
const DefaultInterval = 10 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "thermal_zone",
		Description: "thermal zone temperatures and cooling device states from /sys/class/thermal",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			c := &sampler.Common{Interval: sampler.Duration(DefaultInterval)}
			return c
		},
		New:          func(sampler.Configurable) sampler.Plugin { return &ThermalZone{} },
		SampleConfig: sampleConfig,
	})
}

type reading struct {
	f *kernfs.File
	d *metric.Desc
	// div scales the value (millidegrees to degrees).
	div float64
}

// ThermalZone is the thermal_zone plugin.
type ThermalZone struct {
	readings []reading
}

// maxReadings bounds the files followed.
const maxReadings = 1024

// Init lists zones and cooling devices (registered at boot by their
// drivers) and reads their types once.
func (t *ThermalZone) Init(env sampler.Env) error {
	dir := env.FS.Path("sys", "class", "thermal")
	zones := list(dir, "thermal_zone")
	for _, z := range zones {
		typ, err := readType(z)
		if err != nil {
			continue // a zone without a type is not usable; node_exporter fails the scrape
		}
		t.add(z, "temp", metric.NewDesc("node_thermal_zone_temp", "Zone temperature in Celsius", metric.Gauge,
			"zone", strings.TrimPrefix(filepath.Base(z), "thermal_zone"), "type", typ), 1000)
	}
	for _, c := range list(dir, "cooling_device") {
		typ, err := readType(c)
		if err != nil {
			continue
		}
		name := strings.TrimPrefix(filepath.Base(c), "cooling_device")
		t.add(c, "cur_state", metric.NewDesc("node_cooling_device_cur_state", "Current throttle state of the cooling device",
			metric.Gauge, "name", name, "type", typ), 1)
		t.add(c, "max_state", metric.NewDesc("node_cooling_device_max_state", "Maximum throttle state of the cooling device",
			metric.Gauge, "name", name, "type", typ), 1)
	}
	if len(t.readings) > maxReadings {
		t.readings = t.readings[:maxReadings]
	}
	if len(t.readings) == 0 {
		return sampler.ErrNotAvailable // no thermal zones: the plugin is left out
	}
	return nil
}

func list(dir, prefix string) []string {
	paths, _ := filepath.Glob(filepath.Join(dir, prefix+"[0-9]*"))
	num := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), prefix))
		return n
	}
	sort.Slice(paths, func(i, j int) bool { return num(paths[i]) < num(paths[j]) })
	return paths
}

func readType(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "type"))
	if err != nil {
		return "", err
	}
	line, _ := kernfs.NextLine(b)
	if len(line) > 64 {
		line = line[:64]
	}
	return string(line), nil
}

func (t *ThermalZone) add(dir, file string, d *metric.Desc, div float64) {
	t.readings = append(t.readings, reading{f: kernfs.NewFile(filepath.Join(dir, file), 32), d: d, div: div})
}

// Sample reads every temperature and state. A sensor that has no value
// now (ENODATA, EAGAIN, EINVAL: a sleeping or broken sensor) is left out
// of this tick without an error.
func (t *ThermalZone) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if len(t.readings) == 0 {
		return sampler.ErrNotAvailable
	}
	var first error
	for _, r := range t.readings {
		data, err := r.f.Read()
		if err != nil {
			if !errors.Is(err, syscall.ENODATA) && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINVAL) && first == nil {
				first = err
			}
			continue
		}
		v, err := Parse(data)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", r.f.Path(), err)
			}
			continue
		}
		b.Add(r.d, float64(v)/r.div)
	}
	return first
}

// Parse reads a one-number attribute (temperatures can be negative).
func Parse(data []byte) (int64, error) {
	line, _ := kernfs.NextLine(data)
	line = kernfs.TrimSpace(line)
	v, err := kernfs.ParseInt(line)
	if err != nil {
		if len(line) > 20 {
			line = line[:20]
		}
		return 0, fmt.Errorf("%q: want an integer", line)
	}
	return v, nil
}
