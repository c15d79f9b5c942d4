// Package filefd samples /proc/sys/fs/file-nr (node_exporter's filefd
// collector): open file handles and their system-wide limit.
package filefd

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "filefd",
		Description:  "allocated and maximum file handles from /proc/sys/fs/file-nr",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &FileFD{} },
		SampleConfig: sampleConfig,
	})
}

// FileFD is the filefd plugin.
type FileFD struct {
	file       *kernfs.File
	alloc, max *metric.Desc
}

// Init resolves the file under the root.
func (f *FileFD) Init(env sampler.Env) error {
	f.file = kernfs.NewFile(env.FS.Path("proc", "sys", "fs", "file-nr"), 128)
	f.file.NonBlocking = true
	f.alloc = metric.NewDesc("node_filefd_allocated", "File descriptor statistics: allocated.", metric.Gauge)
	f.max = metric.NewDesc("node_filefd_maximum", "File descriptor statistics: maximum.", metric.Gauge)
	return nil
}

// Sample reads the first and third numbers of file-nr.
func (f *FileFD) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := f.file.Read()
	if err != nil {
		return err
	}
	alloc, max, err := Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", f.file.Path(), err)
	}
	b.Add(f.alloc, float64(alloc))
	b.Add(f.max, float64(max))
	return nil
}

// Parse reads "allocated unused maximum" (tab-separated) content.
func Parse(data []byte) (alloc, max uint64, err error) {
	line, _ := kernfs.NextLine(data)
	var f [4][]byte
	if n := kernfs.Fields(line, f[:]); n != 3 {
		return 0, 0, fmt.Errorf("%d fields, want \"allocated unused maximum\"", n)
	}
	if alloc, err = kernfs.ParseUint(f[0]); err != nil {
		return 0, 0, fmt.Errorf("allocated %q: want an integer", f[0])
	}
	if max, err = kernfs.ParseUint(f[2]); err != nil {
		return 0, 0, fmt.Errorf("maximum %q: want an integer", f[2])
	}
	return alloc, max, nil
}
