// Package watchdog samples /sys/class/watchdog (node_exporter's watchdog
// collector, 1.9).
package watchdog

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
		Name:         "watchdog",
		Description:  "watchdog timers from /sys/class/watchdog",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Watchdog{} },
		SampleConfig: sampleConfig,
	})
}

// numeric are the integer attributes: file, metric, help.
var numeric = [...][3]string{
	{"bootstatus", "node_watchdog_bootstatus", "Value of /sys/class/watchdog/<watchdog>/bootstatus"},
	{"fw_version", "node_watchdog_fw_version", "Value of /sys/class/watchdog/<watchdog>/fw_version"},
	{"nowayout", "node_watchdog_nowayout", "Value of /sys/class/watchdog/<watchdog>/nowayout"},
	{"timeleft", "node_watchdog_timeleft_seconds", "Value of /sys/class/watchdog/<watchdog>/timeleft"},
	{"timeout", "node_watchdog_timeout_seconds", "Value of /sys/class/watchdog/<watchdog>/timeout"},
	{"pretimeout", "node_watchdog_pretimeout_seconds", "Value of /sys/class/watchdog/<watchdog>/pretimeout"},
	{"access_cs0", "node_watchdog_access_cs0", "Value of /sys/class/watchdog/<watchdog>/access_cs0"},
}

// textual are the info labels after "name", each read from its file.
var textual = [...]string{"options", "identity", "state", "status", "pretimeout_governor"}

type value struct {
	attr *sysattr.Attr
	desc *metric.Desc
}

type device struct {
	values []value
	text   *sysattr.Info
	info   *infodesc.Desc
}

// Watchdog is the watchdog plugin.
type Watchdog struct {
	devs []*device
}

// Init lists the watchdog devices (registered by their drivers at boot)
// and the attributes each has.
func (w *Watchdog) Init(env sampler.Env) error {
	dir := env.FS.Path("sys", "class", "watchdog")
	for _, name := range sysattr.Devices(dir) {
		d := &device{info: infodesc.New("node_watchdog_info", "Info of /sys/class/watchdog/<watchdog>", metric.Gauge,
			"name", "options", "identity", "state", "status", "pretimeout_governor")}
		dev := filepath.Join(dir, name)
		for _, n := range numeric {
			if a := sysattr.Open(dev, n[0]); a != nil {
				d.values = append(d.values, value{a, metric.NewDesc(n[1], n[2], metric.Gauge, "name", name)})
			}
		}
		d.text = sysattr.OpenInfo(dev, name, textual[:])
		w.devs = append(w.devs, d)
	}
	if len(w.devs) == 0 {
		return sampler.ErrNotAvailable
	}
	return nil
}

// Sample reads every attribute; a value the driver cannot give now is left
// out, a malformed one is an error naming the file.
func (w *Watchdog) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var first error
	for _, d := range w.devs {
		for _, v := range d.values {
			n, err := v.attr.Int()
			if err != nil {
				if !sysattr.Absent(err) && first == nil {
					first = err
				}
				continue
			}
			b.Add(v.desc, float64(n))
		}
		vals, err := d.text.Read()
		if err != nil && first == nil {
			first = err
		}
		b.Add(d.info.Get(vals), 1)
	}
	return first
}
