package report

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// nodePower writes what the power, hwmon and cpu plugins send for one
// node: RAPL package and DRAM counters at the given watts (and the mmio
// view of the package, which must not count twice), or, with hwmonW > 0
// and no RAPL, an hwmon power meter; and ncpu idle CPU counters.
func nodePower(tb testing.TB, st *store.Store, node string, pkgW, dramW, hwmonW float64, ncpu int, start time.Time, dur, interval time.Duration) {
	tb.Helper()
	var descs []*metric.Desc
	if pkgW > 0 {
		descs = append(descs,
			metric.NewDesc("node_rapl_package_joules_total", "", metric.Counter, "index", "0", "path", "/sys/class/powercap/intel-rapl:0"),
			metric.NewDesc("node_rapl_dram_joules_total", "", metric.Counter, "index", "0", "path", "/sys/class/powercap/intel-rapl:0:0"),
			metric.NewDesc("node_rapl_package_joules_total", "", metric.Counter, "index", "0", "path", "/sys/class/powercap/intel-rapl-mmio:0"))
	}
	if hwmonW > 0 {
		descs = append(descs, metric.NewDesc("node_hwmon_power_average_watt", "", metric.Gauge, "chip", "acpi_power_meter", "sensor", "power1"))
	}
	for c := 0; c < ncpu; c++ {
		descs = append(descs, metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", strconv.Itoa(c), "mode", "idle"))
	}
	vals := make([]float64, len(descs))
	// RAPL counters do not start at zero: the node has run before the job.
	base := 5e5
	for t := time.Duration(0); t <= dur; t += interval {
		s := t.Seconds()
		i := 0
		if pkgW > 0 {
			vals[0], vals[1], vals[2] = base+pkgW*s, base+dramW*s, base+pkgW*s
			i = 3
		}
		if hwmonW > 0 {
			vals[i] = hwmonW
			i++
		}
		for ; i < len(vals); i++ {
			vals[i] = s
		}
		if err := st.AppendTick(node, start.Add(t), descs, vals, false); err != nil {
			tb.Fatal(err)
		}
	}
}

// A job on three nodes for 10 minutes, 4 CPUs on each: cn1 has 8 CPUs
// (shared: half its energy is the job's), cn2 has 4 (the whole node),
// cn3 has no RAPL but an hwmon power meter and no CPU count (whole node).
func TestReportEnergy(t *testing.T) {
	st, q := newStore(t)
	nodes := []string{"cn1", "cn2", "cn3"}
	flat := func(int) (float64, float64, float64, float64) { return 2, gib, 0, 0 }
	dur := 10 * time.Minute
	synthJob(t, st, "31", nodes, []nodeLoad{flat, flat, flat}, 4, 0, t0, dur, 10*time.Second, 0, 0)
	// From a minute before the job to a minute after: a node's power
	// outside the job is not the job's.
	nodePower(t, st, "cn1", 200, 20, 0, 8, t0.Add(-time.Minute), dur+2*time.Minute, 10*time.Second)
	nodePower(t, st, "cn2", 300, 20, 0, 4, t0.Add(-time.Minute), dur+2*time.Minute, 10*time.Second)
	nodePower(t, st, "cn3", 0, 0, 150, 0, t0.Add(-time.Minute), dur+2*time.Minute, 10*time.Second)
	job := jobs.Job{ID: "31", Nodes: nodes, CPUs: 12, Start: t0, End: t0.Add(dur), State: jobs.StateCompleted}
	r, err := Build(context.Background(), q, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e := r.Energy
	if e == nil {
		t.Fatal("no energy section")
	}
	sec := dur.Seconds()
	want := []NodeEnergy{
		{Node: "cn1", NodeJoules: 220 * sec, Joules: 110 * sec, Share: 0.5, Source: "rapl"},
		{Node: "cn2", NodeJoules: 320 * sec, Joules: 320 * sec, Share: 1, Source: "rapl"},
		{Node: "cn3", NodeJoules: 150 * sec, Joules: 150 * sec, Share: 1, Source: "hwmon_power"},
	}
	if len(e.Nodes) != len(want) {
		t.Fatalf("nodes %+v", e.Nodes)
	}
	close := func(a, b float64) bool { return math.Abs(a-b) <= 0.01*b }
	for i, w := range want {
		g := e.Nodes[i]
		if g.Node != w.Node || g.Source != w.Source || g.Share != w.Share || !close(g.NodeJoules, w.NodeJoules) || !close(g.Joules, w.Joules) {
			t.Errorf("node %d: %+v, want %+v (energies within 1 %%)", i, g, w)
		}
	}
	if !e.Shared || !close(e.Joules, (110+320+150)*sec) || !close(e.NodeJoules, (220+320+150)*sec) {
		t.Errorf("job %v J of %v J, shared %v", e.Joules, e.NodeJoules, e.Shared)
	}
	var notes string
	for _, n := range r.Summary.Notes {
		notes += n + "\n"
	}
	if !strings.Contains(notes, "energy: the job used 348.0 kJ (0.10 kWh) on 3 nodes") || !strings.Contains(notes, "split by this job's share of its CPUs") || !strings.Contains(notes, "RAPL measures the CPU packages and memory only") {
		t.Errorf("notes do not say how energy was split and measured:\n%s", notes)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	i := strings.Index(text, "Energy\n")
	if i < 0 {
		t.Fatalf("no energy block in\n%s", text)
	}
	block, _, _ := strings.Cut(text[i:], "Notes")
	testutil.Golden(t, "testdata/energy.txt", []byte(block))
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"energy":{"joules":`)) || !bytes.Contains(js, []byte(`"source":"hwmon_power"`)) {
		t.Errorf("JSON lacks the energy section: %s", js)
	}
	// Once the samples expire the kept summary gives the same section.
	again := fromKeptSummary(t, r)
	if again.Energy == nil || !close(again.Energy.Joules, e.Joules) || len(again.Energy.Nodes) != 3 || again.Energy.Nodes[2].Source != "hwmon_power" {
		t.Fatalf("energy from the summary %+v, want %+v", again.Energy, e)
	}
	if got := sectionText(t, again, "Energy"); got != block {
		t.Errorf("energy block from the summary:\n%s\nfrom the samples:\n%s", got, block)
	}
}

// Without power series the report has no energy section, and says nothing
// about energy.
func TestReportNoEnergy(t *testing.T) {
	job, q := wasteJob(t)
	r, err := Build(context.Background(), q, job, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.Energy != nil {
		t.Errorf("energy %+v without power series", r.Energy)
	}
	for _, n := range r.Summary.Notes {
		if strings.Contains(n, "energy") {
			t.Errorf("note %q", n)
		}
	}
}

func TestCPUShare(t *testing.T) {
	for _, tc := range []struct{ job, node, want float64 }{
		{4, 8, 0.5}, {8, 8, 1}, {16, 8, 1}, {0, 8, 1}, {4, 0, 1}, {1, 64, 1.0 / 64},
	} {
		if got := CPUShare(tc.job, tc.node); got != tc.want {
			t.Errorf("CPUShare(%v, %v) = %v, want %v", tc.job, tc.node, got, tc.want)
		}
	}
}
