// Package entropy samples the kernel's random pool (node_exporter's
// entropy collector).
package entropy

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "entropy",
		Description:  "available entropy and pool size from /proc/sys/kernel/random",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Entropy{} },
		SampleConfig: sampleConfig,
	})
}

// Entropy is the entropy plugin.
type Entropy struct {
	avail, pool         *kernfs.File
	availDesc, poolDesc *metric.Desc
	noPool              bool
}

// Init resolves the files under the root.
func (e *Entropy) Init(env sampler.Env) error {
	e.avail = kernfs.NewFile(env.FS.Path("proc", "sys", "kernel", "random", "entropy_avail"), 64)
	e.pool = kernfs.NewFile(env.FS.Path("proc", "sys", "kernel", "random", "poolsize"), 64)
	e.avail.NonBlocking, e.pool.NonBlocking = true, true
	e.availDesc = metric.NewDesc("node_entropy_available_bits", "Bits of available entropy.", metric.Gauge)
	e.poolDesc = metric.NewDesc("node_entropy_pool_size_bits", "Bits of entropy pool.", metric.Gauge)
	return nil
}

// Sample reads both numbers; the pool size is optional, as in node_exporter.
func (e *Entropy) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	v, err := readUint(e.avail)
	if err != nil {
		return err
	}
	b.Add(e.availDesc, float64(v))
	if e.noPool {
		return nil
	}
	v, err = readUint(e.pool)
	if errors.Is(err, fs.ErrNotExist) {
		e.noPool = true
		return nil
	}
	if err != nil {
		return err
	}
	b.Add(e.poolDesc, float64(v))
	return nil
}

func readUint(f *kernfs.File) (uint64, error) {
	data, err := f.Read()
	if err != nil {
		return 0, err
	}
	v, err := Parse(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.Path(), err)
	}
	return v, nil
}

// Parse reads a one-number /proc/sys file.
func Parse(data []byte) (uint64, error) {
	line, _ := kernfs.NextLine(data)
	line = kernfs.TrimSpace(line)
	v, err := kernfs.ParseUint(line)
	if err != nil {
		return 0, fmt.Errorf("%q: want an integer", clip(line))
	}
	return v, nil
}

func clip(b []byte) []byte {
	if len(b) > 20 {
		return b[:20]
	}
	return b
}
