package self_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/self"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// addPlugin appends plugin stats as the scheduler does while it is built.
func addPlugin(st *sampler.Stats, name string, errs, samples uint64, nanos int64) {
	ps := &sampler.PluginStats{Name: name}
	ps.Errors.Store(errs)
	ps.Samples.Store(samples)
	ps.LastNanos.Store(nanos)
	st.Plugins = append(st.Plugins, ps)
}

// split separates the process's own CPU and RSS, which vary, from the rest.
func split(b *metric.Batch) (own map[string]float64, rest metric.Batch) {
	own = map[string]float64{}
	rest.Time = b.Time
	for _, s := range b.Samples() {
		switch s.Desc.Name {
		case "vigil_sampler_cpu_seconds_total", "vigil_sampler_resident_memory_bytes",
			"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
			"process_open_fds", "process_max_fds", "process_start_time_seconds":
			own[s.Desc.Name] = s.Value
		default:
			rest.Add(s.Desc, s.Value)
		}
	}
	return own, rest
}

func sample(t *testing.T, p sampler.Plugin) *metric.Batch {
	t.Helper()
	var b metric.Batch
	now := time.Unix(1700000000, 0)
	b.Reset(now)
	if err := p.Sample(context.Background(), now, &b); err != nil {
		t.Fatalf("sample: %v", err)
	}
	return &b
}

func TestStats(t *testing.T) {
	// The root is ignored: self reads the real /proc/self.
	p, st := testutil.NewPlugin(t, "self", t.TempDir(), nil)
	// Plugins are added after Init, as the scheduler does.
	addPlugin(st, "cpu", 0, 40, 1_500_000)
	addPlugin(st, "load", 3, 3, 20_000)
	st.Ticks.Store(1234)
	st.Overruns.Store(2)
	own, rest := split(sample(t, p))
	// ticks, overruns; per plugin errors, duration, samples and
	// node_exporter's duration and success.
	if got := len(rest.Samples()); got != 2+2*5 {
		t.Errorf("first tick: %d scheduler samples, want 12", got)
	}
	// The same process figures under node_exporter's names (as every
	// Prometheus client library exports them).
	if own["process_resident_memory_bytes"] < 1<<20 || own["process_virtual_memory_bytes"] < own["process_resident_memory_bytes"] {
		t.Errorf("process memory: resident %v, virtual %v", own["process_resident_memory_bytes"], own["process_virtual_memory_bytes"])
	}
	if fds, max := own["process_open_fds"], own["process_max_fds"]; fds < 3 || max < fds {
		t.Errorf("open fds %v, max %v: want at least stdin/out/err and max ≥ open", fds, max)
	}
	if st := own["process_start_time_seconds"]; time.Since(time.Unix(int64(st), 0)) > time.Minute {
		t.Errorf("start time %v is not this test's", st)
	}
	if own["vigil_sampler_resident_memory_bytes"] < 1<<20 {
		t.Errorf("resident memory = %v, want > 1 MiB", own["vigil_sampler_resident_memory_bytes"])
	}
	if cpu, ok := own["vigil_sampler_cpu_seconds_total"]; !ok || cpu < 0 {
		t.Errorf("cpu seconds = %v (present %v), want >= 0", cpu, ok)
	}

	// The list grows and counters move; cached series stay the same.
	first := rest.Samples()[2].Desc
	addPlugin(st, "procs", 1, 0, 3_000_000_000)
	st.Ticks.Add(1)
	st.Plugins[1].Errors.Add(1)
	_, rest = split(sample(t, p))
	if rest.Samples()[2].Desc != first {
		t.Error("descriptor of an existing plugin was recreated")
	}
	testutil.Golden(t, "testdata/stats/want.txt", testutil.Render(t, &rest))
}

func TestNoStats(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "self", t.TempDir(), nil)
	if err := p.Init(sampler.Env{}); err != nil {
		t.Fatal(err)
	}
	b := sample(t, p)
	if b.Len() != 2+6 {
		t.Errorf("without scheduler stats: %d samples, want 8 (cpu, rss and 6 process_*)", b.Len())
	}
}

// exporter_names = false leaves only Vigil's own names.
func TestWithoutExporterNames(t *testing.T) {
	p, st := testutil.NewPlugin(t, "self", t.TempDir(), &self.Config{ExporterNames: false})
	addPlugin(st, "cpu", 0, 40, 1_500_000)
	b := sample(t, p)
	for _, s := range b.Samples() {
		if !strings.HasPrefix(s.Desc.Name, "vigil_") {
			t.Errorf("series %s with exporter_names off", s.Desc.Name)
		}
	}
	if b.Len() != 2+2+3 {
		t.Errorf("%d samples, want 7", b.Len())
	}
}

// A plugin's last sample failing shows as node_scrape_collector_success 0.
func TestCollectorSuccess(t *testing.T) {
	p, st := testutil.NewPlugin(t, "self", t.TempDir(), nil)
	addPlugin(st, "cpu", 0, 40, 1_500_000)
	addPlugin(st, "hwmon", 1, 0, 2_000)
	st.Plugins[1].LastFail.Store(true)
	got := map[string]float64{}
	for _, s := range sample(t, p).Samples() {
		if s.Desc.Name == "node_scrape_collector_success" {
			got[s.Desc.Labels[0].Value] = s.Value
		}
	}
	if got["cpu"] != 1 || got["hwmon"] != 0 || len(got) != 2 {
		t.Errorf("node_scrape_collector_success = %v, want cpu 1, hwmon 0", got)
	}
}

func TestParseStatm(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    uint64
		wantErr string
	}{
		{in: "765 421 393 5 0 123 0\n", want: 421},
		{in: "1 2", want: 2},
		{in: "765\n", wantErr: "want at least 2 fields, found 1"},
		{in: "", wantErr: "found 0"},
		{in: "1 -2 3", wantErr: `resident "-2"`},
		{in: "1 99999999999999999999999 3", wantErr: "resident"},
	} {
		got, err := self.ParseStatm([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseStatm(%q) err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseStatm(%q) = %d, %v, want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p, st := testutil.NewPlugin(t, "self", t.TempDir(), nil)
	for _, n := range []string{"cpu", "memory", "procs"} {
		addPlugin(st, n, 1, 2, 3)
	}
	if n := testutil.AllocsPerTick(t, p); n != 0 {
		t.Errorf("allocs per tick = %v, want 0", n)
	}
}

func BenchmarkSample(b *testing.B) {
	p, st := testutil.NewPlugin(b, "self", b.TempDir(), nil)
	for _, n := range []string{"cpu", "memory", "procs", "load", "netdev"} {
		addPlugin(st, n, 1, 2, 3)
	}
	var batch metric.Batch
	ctx := context.Background()
	now := time.Unix(1700000000, 0)
	b.ReportAllocs()
	for b.Loop() {
		batch.Reset(now)
		if err := p.Sample(ctx, now, &batch); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseStatm(f *testing.F) {
	f.Add([]byte("765 421 393 5 0 123 0\n"))
	f.Add([]byte("1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = self.ParseStatm(data)
	})
}

// TestOpenFDsFollowsDescriptors: process_open_fds counts the process's
// descriptors exactly (here: opening three more adds three), whether the
// kernel reports the count or the plugin lists /proc/self/fd.
func TestOpenFDsFollowsDescriptors(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "self", t.TempDir(), nil)
	count := func() float64 {
		t.Helper()
		own, _ := split(sample(t, p))
		return own["process_open_fds"]
	}
	before := count()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	// Neither ReadDir's descriptor (closed now) nor the plugin's own on
	// the directory is counted.
	if want := float64(len(ents) - 2); before != want {
		t.Errorf("open fds %v, /proc/self/fd lists %v others", before, want)
	}
	for range 3 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	if got := count(); got != before+3 {
		t.Errorf("after opening 3 files: %v open fds, want %v", got, before+3)
	}
}
