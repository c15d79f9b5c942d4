package simulate

import (
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// raplDescs are the power plugin's series for a two-socket node: a package
// zone per socket and the DRAM zone, named as the plugin names them.
type raplDescs struct {
	pkg  [2]*metric.Desc
	dram *metric.Desc
}

func newRaplDescs() *raplDescs {
	return &raplDescs{
		pkg: [2]*metric.Desc{
			metric.NewDesc("node_rapl_package_joules_total", "Current RAPL package value in joules", metric.Counter,
				"index", "0", "path", "/sys/class/powercap/intel-rapl:0"),
			metric.NewDesc("node_rapl_package_joules_total", "Current RAPL package value in joules", metric.Counter,
				"index", "1", "path", "/sys/class/powercap/intel-rapl:1"),
		},
		dram: metric.NewDesc("node_rapl_dram_joules_total", "Current RAPL dram value in joules", metric.Counter,
			"index", "0", "path", "/sys/class/powercap/intel-rapl:0:0"),
	}
}

// Watts per socket idle and at full load, and DRAM's: typical of a
// current two-socket server, so a job's energy looks plausible.
const (
	pkgIdleW, pkgFullW   = 60.0, 250.0
	dramIdleW, dramFullW = 8.0, 30.0
)

// rapl is one node's energy counters; they only ever rise.
type rapl struct {
	pkg  [2]float64
	dram float64
}

// step advances the counters by dt at load (0..1, the node's busy share)
// and appends them to b.
func (r *rapl) step(d *raplDescs, load float64, dt time.Duration, b *metric.Batch) {
	load = min(max(load, 0), 1)
	sec := max(dt.Seconds(), 0)
	for i := range r.pkg {
		r.pkg[i] += (pkgIdleW + (pkgFullW-pkgIdleW)*load) * sec
		b.Add(d.pkg[i], r.pkg[i])
	}
	r.dram += (dramIdleW + (dramFullW-dramIdleW)*load) * sec
	b.Add(d.dram, r.dram)
}
