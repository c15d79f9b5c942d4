// Package edac samples memory controller error counters from
// /sys/devices/system/edac/mc (node_exporter's edac collector).
package edac

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
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
		Name:         "edac",
		Description:  "correctable and uncorrectable memory errors from /sys/devices/system/edac",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &EDAC{} },
		SampleConfig: sampleConfig,
	})
}

// counter is one error count file and its series.
type counter struct {
	f *kernfs.File
	d *metric.Desc
}

// EDAC is the edac plugin.
type EDAC struct {
	counters []counter
}

// maxCounters bounds the files followed (a two-socket server has a few
// dozen csrows).
const maxCounters = 4096

// Init lists the memory controllers and their csrows. EDAC drivers load at
// boot; a controller registered later is seen after a restart.
func (e *EDAC) Init(env sampler.Env) error {
	mcs, _ := filepath.Glob(env.FS.Path("sys", "devices", "system", "edac", "mc", "mc[0-9]*"))
	sortByNumber(mcs, "mc")
	for _, mc := range mcs {
		c := strings.TrimPrefix(filepath.Base(mc), "mc")
		e.add(mc, "ce_count", "node_edac_correctable_errors_total", "Total correctable memory errors.", "controller", c)
		e.add(mc, "ce_noinfo_count", "node_edac_csrow_correctable_errors_total", "Total correctable memory errors for this csrow.", "controller", c, "csrow", "unknown")
		e.add(mc, "ue_count", "node_edac_uncorrectable_errors_total", "Total uncorrectable memory errors.", "controller", c)
		e.add(mc, "ue_noinfo_count", "node_edac_csrow_uncorrectable_errors_total", "Total uncorrectable memory errors for this csrow.", "controller", c, "csrow", "unknown")
		rows, _ := filepath.Glob(filepath.Join(mc, "csrow[0-9]*"))
		sortByNumber(rows, "csrow")
		for _, row := range rows {
			r := strings.TrimPrefix(filepath.Base(row), "csrow")
			e.add(row, "ce_count", "node_edac_csrow_correctable_errors_total", "Total correctable memory errors for this csrow.", "controller", c, "csrow", r)
			e.add(row, "ue_count", "node_edac_csrow_uncorrectable_errors_total", "Total uncorrectable memory errors for this csrow.", "controller", c, "csrow", r)
		}
	}
	if len(e.counters) > maxCounters {
		return fmt.Errorf("%d EDAC counters, more than %d", len(e.counters), maxCounters)
	}
	if len(e.counters) == 0 {
		return sampler.ErrNotAvailable // no EDAC driver: the plugin is left out
	}
	return nil
}

func (e *EDAC) add(dir, file, name, help string, labels ...string) {
	f := kernfs.NewFile(filepath.Join(dir, file), 32)
	f.NonBlocking = true // counters kept in memory by the EDAC core
	e.counters = append(e.counters, counter{f: f, d: metric.NewDesc(name, help, metric.Counter, labels...)})
}

func sortByNumber(paths []string, prefix string) {
	num := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), prefix))
		return n
	}
	sort.Slice(paths, func(i, j int) bool { return num(paths[i]) < num(paths[j]) })
}

// Sample reads every counter; a node without EDAC is "not available".
func (e *EDAC) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if len(e.counters) == 0 {
		return sampler.ErrNotAvailable
	}
	var first error
	for _, c := range e.counters {
		data, err := c.f.Read()
		if err == nil {
			var v uint64
			if v, err = Parse(data); err == nil {
				b.Add(c.d, float64(v))
				continue
			}
			err = fmt.Errorf("%s: %w", c.f.Path(), err)
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Parse reads a one-number sysfs attribute.
func Parse(data []byte) (uint64, error) {
	line, _ := kernfs.NextLine(data)
	line = kernfs.TrimSpace(line)
	v, err := kernfs.ParseUint(line)
	if err != nil {
		if len(line) > 20 {
			line = line[:20]
		}
		return 0, fmt.Errorf("%q: want an integer", line)
	}
	return v, nil
}
