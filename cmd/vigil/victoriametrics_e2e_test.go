package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestE2ERemoteWriteVictoriaMetrics streams simulated nodes into `vigil
// server --remote-write` pointed at a real VictoriaMetrics (Debian's
// single-node binary) and checks that everything Vigil stored from the
// tree, and its own series, arrived there with the same timestamps and
// values, and that
// queries through VictoriaMetrics' Prometheus API give Vigil's answers.
// Where the two query languages differ (rate), the comparison says so.
func TestE2ERemoteWriteVictoriaMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	vmBin := testutil.LookPeer(t, "victoria-metrics", "apt-get install victoria-metrics")
	vmAddr := freePort(t)
	// latencyOffset 0: VictoriaMetrics otherwise hides the last 30 s from
	// queries; disableCache: a cached answer from before the window was
	// complete would be served again.
	startPeer(t, vmBin, "-storageDataPath="+t.TempDir(), "-httpListenAddr="+vmAddr,
		"-search.latencyOffset=0s", "-search.disableCache", "-retentionPeriod=1", "-loggerLevel=WARN")
	vm := "http://" + vmAddr
	waitUntil(t, "victoria-metrics /health", 30*time.Second, func() bool { return get(vm+"/health") == nil })

	httpAddr, wireAddr := freePort(t), freePort(t)
	base := "http://" + httpAddr
	start(t, "server", "server", "--http", httpAddr, "--listen", wireAddr, "--data", t.TempDir(),
		"--interval", "1s", "--disable-rollups", "--remote-write", vm+"/api/v1/write")
	waitUntil(t, "the server", 15*time.Second, func() bool { return get(base+"/-/ready") == nil })
	const nodes = 12
	start(t, "simulate", "simulate", "--nodes", strconv.Itoa(nodes), "--cpus", "2", "--upstream", wireAddr,
		"--outages=false", "--group-size", "4")
	// 20 s of data: the query windows below reach 15 s back.
	waitUntil(t, "20 ticks of every node", 40*time.Second, func() bool {
		n, err := promScalar(base, `count(count_over_time(node_load1[1m]) >= 20)`)
		return err == nil && n == nodes
	})

	// The window ends a few seconds back, so every tick in it is stored
	// in Vigil; VictoriaMetrics may lag by a batch.
	end := time.Now().Truncate(time.Second).Add(-3 * time.Second)
	const window = 10 * time.Second
	at := end.Add(500 * time.Millisecond) // between ticks: no boundary question
	// job="node": the tree's series and what ingest adds per node;
	// job="vigil": the server's own.
	const all = `{job=~"node|vigil"}`
	want := vigilRaw(t, base, all, window, at)
	if len(want) < nodes*20 {
		t.Fatalf("vigil has only %d series in the window", len(want))
	}
	var got map[string]map[int64]float64
	var diff []string
	var inexact, nan int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		_ = get(vm + "/internal/force_flush")
		got = vmExport(t, vm, all, at.Add(-window), at)
		diff, inexact, nan = compareRaw(want, got)
		if len(diff) == 0 || time.Now().After(deadline) {
			break
		}
	}
	samples := 0
	for _, s := range want {
		samples += len(s)
	}
	if len(diff) > 0 {
		t.Fatalf("victoria-metrics differs from vigil on %d of %d series (%d samples) in the window; first:\n%s",
			len(diff), len(want), samples, strings.Join(diff[:min(10, len(diff))], "\n"))
	}
	t.Logf("raw: %d series, %d samples identical (%d within VictoriaMetrics' decimal precision, none beyond; %d NaN samples it dropped)", len(want), samples, inexact, nan)

	// The same expressions through both Prometheus APIs, over the last
	// 10 s of the window at 1 s steps.
	from := end.Add(-window)
	for _, q := range []struct{ name, vigil, vm string }{
		{"raw gauge", `node_load1`, ""},
		{"raw counter", `node_cpu_seconds_total{mode="user"}`, ""},
		{"irate", `irate(node_cpu_seconds_total[5s])`, ""},
		{"sum by", `sum by (node) (irate(node_cpu_seconds_total{mode!="idle"}[5s]))`, ""},
		{"max_over_time", `max_over_time(node_memory_MemFree_bytes[5s])`, ""},
		{"topk", `topk(3, node_load1)`, ""},
		{"avg without", `avg without (cpu) (node_cpu_seconds_total)`, ""},
		{"the server's own", `vigil_ingest_ticks_total`, ""},
		// The tree carries no histograms; the server's own metrics do
		// (this test's queries fill them).
		{"histogram", `histogram_quantile(0.9, sum by (le) (vigil_http_request_duration_seconds_bucket))`, ""},
		{"histogram by handler", `histogram_quantile(0.5, sum by (le, handler) (vigil_http_request_duration_seconds_bucket))`, ""},
		// VictoriaMetrics' rate is the increase since the last sample
		// before the window over the time between them, without
		// Prometheus' extrapolation to the window's edges: with samples
		// every second that is the change over exactly 5 s.
		{"rate (VictoriaMetrics semantics)", `(node_context_switches_total - node_context_switches_total offset 5s) / 5`, `rate(node_context_switches_total[5s])`},
	} {
		vmq := q.vm
		if vmq == "" {
			vmq = q.vigil
		}
		w := promRange(t, base, q.vigil, from, end)
		g := promRange(t, vm, vmq, from, end)
		if finite(w) == 0 {
			t.Errorf("%s: vigil's %s has no number", q.name, q.vigil)
			continue
		}
		// VictoriaMetrics keeps the metric name through some functions
		// (max_over_time) that drop it in PromQL.
		g = likeNames(w, g)
		if d, _, _ := compareRaw(w, g); len(d) > 0 {
			t.Errorf("%s: vigil %s and victoria-metrics %s differ on %d of %d series; first:\n%s",
				q.name, q.vigil, vmq, len(d), len(w), strings.Join(d[:min(5, len(d))], "\n"))
		}
		// The instant query at the window's end, too.
		wi := promInstant(t, base, q.vigil, end)
		gi := likeNames(wi, promInstant(t, vm, vmq, end))
		if d, _, _ := compareRaw(wi, gi); len(d) > 0 {
			t.Errorf("%s (instant): differ on %d of %d series; first:\n%s", q.name, len(d), len(wi), strings.Join(d[:min(5, len(d))], "\n"))
		}
	}

	// The sender dropped nothing.
	st := remoteWriteStatus(t, base)
	if st.DroppedFull+st.DroppedRejected+st.DroppedShutdown != 0 || st.Sent == 0 {
		t.Errorf("remote write status: %+v", st)
	}
}

// finite counts the points that are numbers.
func finite(m map[string]map[int64]float64) int {
	n := 0
	for _, s := range m {
		for _, v := range s {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				n++
			}
		}
	}
	return n
}

// likeNames drops __name__ from got's series if want's have none.
func likeNames(want, got map[string]map[int64]float64) map[string]map[int64]float64 {
	for k := range want {
		if strings.HasPrefix(k, "__name__=") {
			return got
		}
	}
	out := make(map[string]map[int64]float64, len(got))
	for k, v := range got {
		if strings.HasPrefix(k, "__name__=") {
			_, k, _ = strings.Cut(k, ",")
		}
		out[k] = v
	}
	return out
}

// seriesKey is a label set as sorted name="value" pairs.
func seriesKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, m[k])
	}
	return b.String()
}

// compareRaw returns a line per series whose samples differ and the number
// of values equal only within VictoriaMetrics' precision: it stores a
// value as a decimal mantissa of at most 64 bits and an exponent, so a
// float64 with more significant decimal digits comes back within about
// 1e-15 of itself, not bit for bit.
//
// VictoriaMetrics drops NaN samples (a summary's quantiles before any
// observation) that are not stale markers; those are counted in nan.
func compareRaw(want, got map[string]map[int64]float64) (diff []string, inexact, nan int) {
	for k, ws := range want {
		gs := got[k]
		if gs == nil {
			gs = map[int64]float64{}
		}
		missing := 0
		for ts, wv := range ws {
			gv, ok := gs[ts]
			switch {
			case !ok && math.IsNaN(wv):
				nan++
			case !ok:
				missing++
				if missing == 1 {
					diff = append(diff, fmt.Sprintf("%s: no sample at %d (vigil %v) and %d more", k, ts, wv, len(ws)-1))
				}
			case gv == wv || math.IsNaN(gv) && math.IsNaN(wv):
			case math.Abs(gv-wv) <= 1e-12*math.Max(math.Abs(wv), math.Abs(gv)):
				inexact++
			default:
				diff = append(diff, fmt.Sprintf("%s at %d: vigil %v, victoria-metrics %v", k, ts, wv, gv))
			}
		}
		for ts := range gs {
			if _, ok := ws[ts]; !ok {
				diff = append(diff, fmt.Sprintf("%s: extra sample at %d", k, ts))
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, "extra: "+k)
		}
	}
	slices.Sort(diff)
	return diff, inexact, nan
}

type promAnswer struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func promCall(t *testing.T, base, path string, form url.Values) map[string]map[int64]float64 {
	t.Helper()
	resp, err := http.PostForm(base+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Status != "success" {
		t.Fatalf("%s%s %v: %v: %.500s", base, path, form, err, body)
	}
	out := map[string]map[int64]float64{}
	for _, r := range a.Data.Result {
		pts := r.Values
		if a.Data.ResultType == "vector" {
			pts = [][2]any{r.Value}
		}
		s := map[int64]float64{}
		for _, p := range pts {
			ts, _ := p[0].(float64)
			vs, _ := p[1].(string)
			v, err := strconv.ParseFloat(vs, 64)
			if err != nil {
				t.Fatalf("%s %v: value %v: %v", path, form, p[1], err)
			}
			s[int64(math.Round(ts*1000))] = v
		}
		out[seriesKey(r.Metric)] = s
	}
	return out
}

// vigilRaw returns the raw samples of sel in the window before at.
func vigilRaw(t *testing.T, base, sel string, window time.Duration, at time.Time) map[string]map[int64]float64 {
	return promCall(t, base, "/api/v1/query", url.Values{"query": {fmt.Sprintf("%s[%ds]", sel, int(window.Seconds()))}, "time": {unixArg(at)}})
}

func promRange(t *testing.T, base, q string, from, to time.Time) map[string]map[int64]float64 {
	return promCall(t, base, "/api/v1/query_range", url.Values{"query": {q}, "start": {unixArg(from)}, "end": {unixArg(to)}, "step": {"1"}})
}

func promInstant(t *testing.T, base, q string, at time.Time) map[string]map[int64]float64 {
	return promCall(t, base, "/api/v1/query", url.Values{"query": {q}, "time": {unixArg(at)}})
}

func unixArg(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// vmExport reads raw samples in [from, to] from VictoriaMetrics' export
// API (one JSON object per series and line).
func vmExport(t *testing.T, vm, match string, from, to time.Time) map[string]map[int64]float64 {
	t.Helper()
	resp, err := http.PostForm(vm+"/api/v1/export", url.Values{"match[]": {match}, "start": {unixArg(from)}, "end": {unixArg(to)}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		t.Fatalf("export: %s: %s", resp.Status, b)
	}
	out := map[string]map[int64]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Metric     map[string]string `json:"metric"`
			Values     []float64         `json:"values"`
			Timestamps []int64           `json:"timestamps"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("export line %.200s: %v", sc.Bytes(), err)
		}
		s := out[seriesKey(line.Metric)]
		if s == nil {
			s = map[int64]float64{}
			out[seriesKey(line.Metric)] = s
		}
		for i, ts := range line.Timestamps {
			s[ts] = line.Values[i]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type rwStatus struct {
	Sent            uint64 `json:"samples_sent"`
	Enqueued        uint64 `json:"samples_enqueued"`
	DroppedFull     uint64 `json:"samples_dropped_queue_full"`
	DroppedRejected uint64 `json:"samples_dropped_rejected"`
	DroppedShutdown uint64 `json:"samples_dropped_shutdown"`
	LastError       string `json:"last_error"`
}

func remoteWriteStatus(t *testing.T, base string) rwStatus {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/status/remote_write")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Destinations []rwStatus `json:"destinations"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Data.Destinations) != 1 {
		t.Fatalf("remote write status: %v %+v", err, r)
	}
	return r.Data.Destinations[0]
}
