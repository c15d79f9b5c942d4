// Package infiniband samples the ports of the node's InfiniBand (and RoCE)
// adapters from /sys/class/infiniband (node_exporter's infiniband
// collector): port counters, mlx5 hw_counters, state, physical state, rate.
package infiniband

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval is longer than the sampler's: some drivers (mlx4, qib)
// answer a counter read with a MAD to the port's own PMA, and a node-level
// rate needs no more.
const DefaultInterval = 10 * time.Second

// MaxPorts bounds the ports followed per device, MaxAllPorts in all.
const (
	MaxPorts    = 64
	MaxAllPorts = 1024
)

func init() {
	sampler.Register(sampler.Registration{
		Name:        "infiniband",
		Description: "InfiniBand/RDMA port counters, state and rate from /sys/class/infiniband",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &sampler.Common{Interval: sampler.Duration(DefaultInterval)}
		},
		New:          func(sampler.Configurable) sampler.Plugin { return &Infiniband{} },
		SampleConfig: sampleConfig,
	})
}

// value is one counter file of a port and its last reading.
type value struct {
	f    *kernfs.File
	d    *metric.Desc
	c    *counter
	last uint64
	seen bool
}

type port struct {
	state, phys, rate    *kernfs.File
	stateD, physD, rateD *metric.Desc
	values               []value
}

// Infiniband is the infiniband plugin.
type Infiniband struct {
	log   *slog.Logger
	base  string
	ports []*port
	info  []*metric.Desc
	scan  sysattr.Rescan

	bad, resets, saturated    uint64
	badD, resetsD, saturatedD *metric.Desc
	badLog, resetLog          logging.OnChange
}

// Init lists the devices and ports and the counter files each driver
// provides. Without any (no adapter, or its driver not loaded yet: openibd
// may start after the sampler) the plugin stays in, emits nothing and
// looks again every sysattr.RescanEvery ticks (one failed directory read
// every ten minutes at the default interval) until it finds
// some; once found, the devices are fixed until a restart.
func (ib *Infiniband) Init(env sampler.Env) error {
	ib.log = env.Logger
	ib.base = env.FS.Path("sys", "class", "infiniband")
	ib.badD = metric.NewDesc("vigil_infiniband_bad_reads_total",
		"InfiniBand sysfs files that could not be read or parsed; each is left out of its tick.", metric.Counter)
	ib.resetsD = metric.NewDesc("vigil_infiniband_counter_resets_total",
		"InfiniBand port counters seen going backwards (cleared with perfquery -R, or a driver reload).", metric.Counter)
	ib.saturatedD = metric.NewDesc("vigil_infiniband_saturated_reads_total",
		"Reads of a 32-bit port counter stuck at 2^32-1 (no extended counters), left out of the tick.", metric.Counter)
	_ = ib.list() // none now: Sample looks again
	return nil
}

// list finds the devices and ports; os.ErrNotExist when there are none.
func (ib *Infiniband) list() error {
	for _, dev := range sysattr.Devices(ib.base) {
		dir := filepath.Join(ib.base, dev)
		nums := portNumbers(filepath.Join(dir, "ports"))
		if len(nums) == 0 {
			continue
		}
		ib.info = append(ib.info, metric.NewDesc("node_infiniband_info",
			"Non-numeric data from /sys/class/infiniband/<device>, value is always 1.", metric.Gauge,
			"device", dev, "board_id", attr(dir, "board_id"), "firmware_version", attr(dir, "fw_ver"), "hca_type", attr(dir, "hca_type")))
		for _, num := range nums[:min(len(nums), MaxAllPorts-len(ib.ports))] {
			ib.ports = append(ib.ports, newPort(filepath.Join(dir, "ports", num), dev, num))
		}
		if len(ib.ports) >= MaxAllPorts {
			break
		}
	}
	if len(ib.ports) == 0 {
		return os.ErrNotExist
	}
	return nil
}

// attr is a device's textual attribute at start-up, "" if absent.
func attr(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	line, _ := kernfs.NextLine(b)
	return string(infodesc.Clip(kernfs.TrimSpace(line)))
}

// portNumbers lists a device's ports, in numeric order.
func portNumbers(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var nums []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= 0 {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	out := make([]string, 0, min(len(nums), MaxPorts))
	for _, n := range nums[:min(len(nums), MaxPorts)] {
		out = append(out, strconv.Itoa(n))
	}
	return out
}

func newPort(dir, dev, num string) *port {
	p := &port{
		state: kernfs.NewFile(filepath.Join(dir, "state"), 64),
		phys:  kernfs.NewFile(filepath.Join(dir, "phys_state"), 64),
		rate:  kernfs.NewFile(filepath.Join(dir, "rate"), 64),
		stateD: metric.NewDesc("node_infiniband_state_id",
			"State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)", metric.Gauge, "device", dev, "port", num),
		physD: metric.NewDesc("node_infiniband_physical_state_id",
			"Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)", metric.Gauge, "device", dev, "port", num),
		rateD: metric.NewDesc("node_infiniband_rate_bytes_per_second", "Maximum signal transfer rate", metric.Gauge, "device", dev, "port", num),
	}
	add := func(sub string, defs []counter) {
		for i := range defs {
			c := &defs[i]
			path := filepath.Join(dir, sub, c.file)
			if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
				continue
			}
			typ := metric.Counter
			if c.lifespan {
				typ = metric.Gauge
			}
			p.values = append(p.values, value{f: kernfs.NewFile(path, 64), c: c,
				d: metric.NewDesc("node_infiniband_"+c.metric, c.help, typ, "device", dev, "port", num)})
		}
	}
	add("counters", portCounters[:])
	add("counters_ext", extCounters[:])
	add("hw_counters", hwCounters[:])
	return p
}

// Sample reads every port. A file that cannot be read or parsed is left
// out and counted; the tick goes on.
func (ib *Infiniband) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if len(ib.ports) == 0 {
		if err := ib.scan.Tick(ib.list); err != nil || len(ib.ports) == 0 {
			return sampler.ErrNotAvailable
		}
	}
	for _, d := range ib.info {
		b.Add(d, 1)
	}
	var firstBad error
	for _, p := range ib.ports {
		if v, err := readID(p.state); err == nil {
			b.Add(p.stateD, float64(v))
		} else if !absent(err) {
			ib.bad++
			firstBad = cmp(firstBad, err)
		}
		if v, err := readID(p.phys); err == nil {
			b.Add(p.physD, float64(v))
		} else if !absent(err) {
			ib.bad++
			firstBad = cmp(firstBad, err)
		}
		if v, err := readRate(p.rate); err == nil {
			b.Add(p.rateD, v)
		} else if !absent(err) {
			ib.bad++
			firstBad = cmp(firstBad, err)
		}
		for i := range p.values {
			v := &p.values[i]
			if err := ib.sampleValue(v, b); err != nil {
				ib.bad++
				firstBad = cmp(firstBad, err)
			}
		}
	}
	b.Add(ib.badD, float64(ib.bad))
	b.Add(ib.resetsD, float64(ib.resets))
	b.Add(ib.saturatedD, float64(ib.saturated))
	ib.badLog.Warn(ib.log, "infiniband: file left out (counted in vigil_infiniband_bad_reads_total)", firstBad)
	return nil
}

func cmp(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

func (ib *Infiniband) sampleValue(v *value, b *metric.Batch) error {
	data, err := v.f.Read()
	if err != nil {
		if absent(err) {
			return nil
		}
		return err
	}
	n, st := ParseCounter(data)
	switch st {
	case NotAvailable:
		return nil
	case Malformed:
		return fmt.Errorf("%s: %q is not a counter", v.f.Path(), clip(data))
	}
	if v.c.lifespan {
		b.Add(v.d, float64(n/1000))
		return nil
	}
	if v.c.sat32 && n == math.MaxUint32 {
		ib.saturated++
		return nil
	}
	if v.seen && n < v.last {
		ib.resets++
		ib.resetLog.Warn(ib.log, "infiniband: counter went backwards (counted in vigil_infiniband_counter_resets_total)",
			fmt.Errorf("%s: %d after %d", v.f.Path(), n, v.last))
	}
	v.last, v.seen = n, true
	b.Add(v.d, float64(n)*float64(v.c.mult))
	return nil
}

// absent is a file that is not there now (a port without a PMA, a driver
// without the file): skipped, not counted.
func absent(err error) bool {
	return sysattr.Absent(err)
}

func readID(f *kernfs.File) (uint64, error) {
	data, err := f.Read()
	if err != nil {
		return 0, err
	}
	v, ok := ParseState(data)
	if !ok {
		return 0, fmt.Errorf("%s: %q is not \"<id>: <name>\"", f.Path(), clip(data))
	}
	return v, nil
}

func readRate(f *kernfs.File) (float64, error) {
	data, err := f.Read()
	if err != nil {
		return 0, err
	}
	v, ok := ParseRate(data)
	if !ok {
		return 0, fmt.Errorf("%s: %q is not \"<n> Gb/sec ...\"", f.Path(), clip(data))
	}
	return v, nil
}

func clip(b []byte) []byte {
	b = kernfs.TrimSpace(b)
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
