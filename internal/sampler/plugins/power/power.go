// Package power samples the CPU packages' and DRAM energy counters of RAPL
// through powercap (/sys/class/powercap, node_exporter's rapl collector),
// cheaply enough to run at 10 Hz.
package power

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

// MaxZones bounds the powercap zones followed.
const MaxZones = 256

func init() {
	sampler.Register(sampler.Registration{
		Name:         "power",
		Description:  "RAPL energy counters (packages, cores, DRAM) from /sys/class/powercap",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Power{} },
		SampleConfig: sampleConfig,
	})
}

// zone is one powercap zone with an energy counter.
type zone struct {
	energy *kernfs.File
	d      *metric.Desc
	max    uint64 // max_energy_range_uj; 0 when unknown
	last   uint64 // last raw reading
	total  uint64 // µJ: the first reading plus every increase since
	seen   bool
}

// Power is the power plugin.
type Power struct {
	log        *slog.Logger
	zones      []*zone
	unreadable int

	bad, wraps, resets                 uint64
	badD, wrapsD, resetsD, unreadableD *metric.Desc
	badLog, resetLog                   logging.OnChange
}

// Init finds the zones that have a name (node_exporter's rule: the
// control-type directories such as intel-rapl have none) and reads each
// counter once: energy_uj is readable by root only since Linux 5.10
// (CVE-2020-8694), and a sampler that cannot read it says so once here.
func (p *Power) Init(env sampler.Env) error {
	p.log = env.Logger
	base := env.FS.Path("sys", "class", "powercap")
	uses := map[string]int{}
	var denied []string
	for _, ent := range sysattr.Devices(base) {
		dir := filepath.Join(base, ent)
		raw, err := os.ReadFile(filepath.Join(dir, "name"))
		if err != nil {
			continue
		}
		index, name := IndexAndName(uses, strings.TrimSpace(string(raw)))
		uses[name] = index + 1
		z := &zone{energy: kernfs.NewFile(filepath.Join(dir, "energy_uj"), 64)}
		// The counter is an MSR read on the package (an IPI that spins,
		// never sleeps) or an MMIO read: safe for a raw pread, which
		// keeps 10 Hz ticks off the Go scheduler's sysmon.
		z.energy.NonBlocking = true
		if b, err := os.ReadFile(filepath.Join(dir, "max_energy_range_uj")); err == nil {
			z.max, _ = kernfs.ParseUint(kernfs.TrimSpace(b))
		}
		if _, err := z.energy.Read(); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				denied = append(denied, ent)
				continue
			}
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		z.d = metric.NewDesc("node_rapl_"+sanitize(name)+"_joules_total", "Current RAPL "+name+" value in joules",
			metric.Counter, "index", strconv.Itoa(index), "path", "/sys/class/powercap/"+ent)
		p.zones = append(p.zones, z)
		if len(p.zones) == MaxZones {
			break
		}
	}
	p.unreadable = len(denied)
	if len(denied) > 0 {
		p.log.Warn("power: RAPL energy_uj is readable by root only (Linux 5.10+); these zones are left out",
			"zones", strings.Join(denied, ","))
	}
	if len(p.zones) == 0 {
		return sampler.ErrNotAvailable
	}
	p.badD = metric.NewDesc("vigil_power_bad_reads_total", "RAPL energy_uj reads that failed or did not hold a number, left out of the tick.", metric.Counter)
	p.wrapsD = metric.NewDesc("vigil_power_rapl_wraps_total", "RAPL energy counters seen wrapping at max_energy_range_uj (the exported total goes on).", metric.Counter)
	p.resetsD = metric.NewDesc("vigil_power_rapl_resets_total", "RAPL energy counters seen going backwards other than by a wrap (the step is not counted).", metric.Counter)
	p.unreadableD = metric.NewDesc("vigil_power_unreadable_zones", "RAPL zones whose energy_uj the sampler may not read (root only since Linux 5.10).", metric.Gauge)
	return nil
}

// IndexAndName splits a zone name as procfs does: "package-1" is package
// with index 1; a name without such a suffix gets the count of its earlier
// uses ("dram", "dram" → 0, 1).
func IndexAndName(uses map[string]int, name string) (int, string) {
	if a, b, ok := strings.Cut(name, "-"); ok && !strings.Contains(b, "-") {
		if i, err := strconv.Atoi(b); err == nil {
			return i, a
		}
	}
	return uses[name], name
}

// sanitize keeps [a-zA-Z0-9_] of a metric name part, as node_exporter.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Sample reads every zone's counter and exports its total in joules.
func (p *Power) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var firstBad error
	for _, z := range p.zones {
		data, err := z.energy.Read()
		if err != nil {
			p.bad++
			firstBad = first(firstBad, err)
			continue
		}
		v, err := kernfs.ParseUint(kernfs.TrimSpace(data))
		if err != nil || z.max > 0 && v > z.max {
			p.bad++
			firstBad = first(firstBad, fmt.Errorf("%s: %q is not an energy in µJ up to %d", z.energy.Path(), clip(data), z.max))
			continue
		}
		switch step := Advance(z.last, v, z.max); {
		case !z.seen:
			z.total = v
		case step.Reset:
			p.resets++
			p.resetLog.Warn(p.log, "power: RAPL counter went backwards (counted in vigil_power_rapl_resets_total)",
				fmt.Errorf("%s: %d after %d", z.energy.Path(), v, z.last))
		default:
			if step.Wrapped {
				p.wraps++
			}
			z.total += step.Delta
		}
		z.last, z.seen = v, true
		b.Add(z.d, float64(z.total)/1e6)
	}
	b.Add(p.badD, float64(p.bad))
	b.Add(p.wrapsD, float64(p.wraps))
	b.Add(p.resetsD, float64(p.resets))
	b.Add(p.unreadableD, float64(p.unreadable))
	p.badLog.Warn(p.log, "power: zone left out (counted in vigil_power_bad_reads_total)", firstBad)
	return nil
}

// Step is the energy between two readings of a counter.
type Step struct {
	Delta   uint64
	Wrapped bool
	// Reset: the counter went back by more than a wrap explains (a
	// driver reload); the energy in between is unknown and not counted.
	Reset bool
}

// Advance is the increase from prev to cur of a counter that wraps to 0
// after max (0: unknown). A backwards step is a wrap only if what it
// implies is less than half the range: at any sane interval a package
// uses far less between two reads (the range is about 262 kJ, minutes
// at full power).
func Advance(prev, cur, max uint64) Step {
	if cur >= prev {
		return Step{Delta: cur - prev}
	}
	if max == 0 || prev > max {
		return Step{Reset: true}
	}
	d := max - prev + cur
	if d > max/2 {
		return Step{Reset: true}
	}
	return Step{Delta: d, Wrapped: true}
}

func first(a, b error) error {
	if a == nil {
		return b
	}
	return a
}

func clip(b []byte) []byte {
	b = kernfs.TrimSpace(b)
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
