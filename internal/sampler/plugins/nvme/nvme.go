// Package nvme samples /sys/class/nvme (node_exporter's nvme collector).
package nvme

import (
	"context"
	_ "embed"
	"path/filepath"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "nvme",
		Description:  "NVMe controller info from /sys/class/nvme",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &NVMe{} },
		SampleConfig: sampleConfig,
	})
}

// files are read for the info labels after "device", in order.
var files = [...]string{"firmware_rev", "model", "serial", "state"}

type controller struct {
	attrs *sysattr.Info
	info  *infodesc.Desc
}

// NVMe is the nvme plugin.
type NVMe struct {
	ctrls []*controller
}

// Init lists the controllers (they appear at boot or on hotplug, which a
// restart picks up).
func (n *NVMe) Init(env sampler.Env) error {
	dir := env.FS.Path("sys", "class", "nvme")
	for _, name := range sysattr.Devices(dir) {
		c := &controller{info: infodesc.New("node_nvme_info", "Non-numeric data from /sys/class/nvme/<device>, value is always 1.",
			metric.Gauge, "device", "firmware_revision", "model", "serial", "state")}
		c.attrs = sysattr.OpenInfo(filepath.Join(dir, name), name, files[:])
		n.ctrls = append(n.ctrls, c)
	}
	if len(n.ctrls) == 0 {
		return sampler.ErrNotAvailable
	}
	return nil
}

// Sample re-reads the attributes (state changes on reset; firmware on
// update) and reports one info series per controller.
func (n *NVMe) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var first error
	for _, c := range n.ctrls {
		vals, err := c.attrs.Read()
		if err != nil && first == nil {
			first = err
		}
		b.Add(c.info.Get(vals), 1)
	}
	return first
}
