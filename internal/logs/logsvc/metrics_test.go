package logsvc

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/events"
)

// capture is a storage.Appendable that keeps what each commit wrote.
type capture struct {
	mu      sync.Mutex
	commits []map[string]float64 // labels.String() → value
	ls      map[string]labels.Labels
	history map[string][]float64 // every value appended, in order
}

func (c *capture) Appender(context.Context) storage.Appender { return &captureApp{c: c} }

type captureApp struct {
	storage.Appender // only Append, Commit and Rollback are called
	c                *capture
	got              map[string]float64 // the newest sample of each series
	ts               map[string]int64
	ls               map[string]labels.Labels
	seq              []string
	vals             []float64
}

func (a *captureApp) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	if a.got == nil {
		a.got, a.ts, a.ls = map[string]float64{}, map[string]int64{}, map[string]labels.Labels{}
	}
	k := l.String()
	if t0, dup := a.ts[k]; dup && t <= t0 {
		return 0, fmt.Errorf("series %s appended at %d after %d", k, t, t0)
	}
	a.got[k], a.ts[k], a.ls[k] = v, t, l
	a.seq, a.vals = append(a.seq, k), append(a.vals, v)
	return 0, nil
}

func (a *captureApp) Commit() error {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	a.c.commits = append(a.c.commits, a.got)
	if a.c.ls == nil {
		a.c.ls = map[string]labels.Labels{}
	}
	for k, l := range a.ls {
		a.c.ls[k] = l
	}
	if a.c.history == nil {
		a.c.history = map[string][]float64{}
	}
	for i, k := range a.seq {
		a.c.history[k] = append(a.c.history[k], a.vals[i])
	}
	return nil
}

func (a *captureApp) Rollback() error { return nil }

// last returns the samples of the newest commit whose labels match all of
// want (name=value pairs), stale markers included.
func (c *capture) last(t *testing.T, want ...string) map[string]float64 {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.commits) == 0 {
		t.Fatal("nothing written")
	}
	out := map[string]float64{}
	for k, v := range c.commits[len(c.commits)-1] {
		l := c.ls[k]
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			if l.Get(want[i]) != want[i+1] {
				ok = false
			}
		}
		if ok {
			out[k] = v
		}
	}
	return out
}

// one returns the value of the only series matching want.
func (c *capture) one(t *testing.T, want ...string) (labels.Labels, float64) {
	t.Helper()
	m := c.last(t, want...)
	if len(m) != 1 {
		t.Fatalf("want one series with %v, have %d: %v", want, len(m), m)
	}
	for k, v := range m {
		return c.ls[k], v
	}
	panic("unreachable")
}

var targetLabels = labels.FromStrings("job", "vigil", "instance", "vigil-server", "node", "vigil-server")

func metricsConfig(c *capture) func(*Config) {
	return func(cfg *Config) {
		cfg.Metrics = MetricsConfig{Appendable: c, Interval: time.Hour, Labels: targetLabels}
	}
}

// sshLines are messages of one pattern from n hosts, each host i sending
// i+1 of them at severity err (PRI 35 = auth.err).
func sshLines(n int) (string, int) {
	var b strings.Builder
	total := 0
	for i := range n {
		for j := 0; j <= i; j++ {
			fmt.Fprintf(&b, "<35>Jan  5 10:00:00 cn%02d sshd[%d]: Failed password for root from 10.0.%d.%d port %d ssh2\n", i, 100+j, i, j, 4000+j)
			total++
		}
	}
	return b.String(), total
}

func TestLogMetricsCountPatternsAndHosts(t *testing.T) {
	c := &capture{}
	h := start(t, t.TempDir(), metricsConfig(c))
	lines, n := sshLines(4) // 1+2+3+4 messages from cn00..cn03
	lines += "<14>Jan  5 10:00:01 cn09 kernel: mlx5_core 0000:3b:00.0: link down\n"
	sendTCP(t, h.tcpAddr(), lines)
	h.waitAccepted(t, uint64(n+1))
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	ls, v := c.one(t, labels.MetricName, metricMessages, "app", "sshd")
	if v != float64(n) || ls.Get("severity") != "err" {
		t.Errorf("sshd messages: %s = %v, want %d with severity err", ls, v, n)
	}
	targetLabels.Range(func(l labels.Label) {
		if ls.Get(l.Name) != l.Value {
			t.Errorf("%s lacks the target label %s", ls, l)
		}
	})
	pat := ls.Get("pattern")
	// A counter new in this process starts with a zero sample, so that
	// increase() sees its first interval's messages.
	if hist := c.history[ls.String()]; !slices.Equal(hist, []float64{0, float64(n)}) {
		t.Errorf("%s written as %v, want [0 %d]", ls, hist, n)
	}
	if _, v := c.one(t, labels.MetricName, metricMessages, "app", "kernel", "severity", "info"); v != 1 {
		t.Errorf("kernel messages = %v, want 1", v)
	}
	if _, v := c.one(t, labels.MetricName, metricNewPatterns); v != 2 {
		t.Errorf("new patterns = %v, want 2", v)
	}
	if _, v := c.one(t, labels.MetricName, metricPatternHosts, "pattern", pat); v != 4 {
		t.Errorf("hosts of pattern %s = %v, want 4", pat, v)
	}
	if _, v := c.one(t, labels.MetricName, metricFirstSeen, "pattern", pat); math.Abs(v-float64(time.Now().Unix())) > 60 {
		t.Errorf("first seen %v, want about now", v)
	}
	for i := range 4 {
		host := fmt.Sprintf("cn%02d", i)
		if ls, v := c.one(t, labels.MetricName, metricMessagesByHost, "pattern", pat, "host", host); v != float64(i+1) || ls.Get("app") != "" {
			t.Errorf("%s = %v, want %d", ls, v, i+1)
		}
	}
	if _, v := c.one(t, labels.MetricName, metricFolded); v != 0 {
		t.Errorf("folded = %v, want 0", v)
	}
}

func TestLogMetricsBounds(t *testing.T) {
	c := &capture{}
	h := start(t, t.TempDir(), func(cfg *Config) {
		metricsConfig(c)(cfg)
		cfg.Metrics.MaxPatternSeries = 2
		cfg.Metrics.TopHosts = 2
		cfg.Metrics.MaxHostSeries = 3
	})
	var b strings.Builder
	// Three apps, three patterns: the third label set is folded.
	apps := []string{"alpha", "beta", "gamma"}
	for i, app := range apps {
		for host := range 3 {
			for range 1 + host*(i+1) {
				fmt.Fprintf(&b, "<11>Jan  5 10:00:00 cn%d %s: stage %s finished\n", host, app, app)
			}
		}
	}
	sendTCP(t, h.tcpAddr(), b.String())
	h.waitAccepted(t, uint64(6+9+12))
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := c.last(t, labels.MetricName, metricMessages); len(got) != 3 {
		t.Errorf("want 2 pattern series and other, have %v", got)
	}
	if _, v := c.one(t, labels.MetricName, metricMessages, "pattern", OtherPattern, "app", OtherPattern, "severity", "err"); v != 12 {
		t.Errorf("other = %v, want gamma's 12 messages", v)
	}
	if _, v := c.one(t, labels.MetricName, metricFolded); v != 12 {
		t.Errorf("folded = %v, want 12", v)
	}
	byHost := c.last(t, labels.MetricName, metricMessagesByHost)
	if len(byHost) != 3 {
		t.Fatalf("by host: want 3 series (the bound), have %v", byHost)
	}
	perPattern := map[string]int{}
	for k, v := range byHost {
		perPattern[c.ls[k].Get("pattern")]++
		if v < 4 { // the busiest: gamma's cn2 (7) and cn1 (4), beta's cn2 (5)
			t.Errorf("%s = %v is not among the top 3", k, v)
		}
	}
	for p, n := range perPattern {
		if n > 2 {
			t.Errorf("pattern %s has %d host series, bound 2", p, n)
		}
	}

	// A quiet interval: the view ranks by the last 5 to 10 minutes, so it
	// stays as it was.
	now := time.Now()
	if err := h.svc.writeMetrics(now.Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if again := c.last(t, labels.MetricName, metricMessagesByHost); !maps.Equal(again, byHost) {
		t.Errorf("after a quiet interval: %v, want %v", again, byHost)
	}
	// Ten quiet minutes: the view and the host counts end, with stale
	// markers.
	if err := h.svc.writeMetrics(now.Add(11 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{metricMessagesByHost, metricPatternHosts} {
		stale := c.last(t, labels.MetricName, name)
		if len(stale) != 3 {
			t.Errorf("%s: want 3 stale markers, have %v", name, stale)
		}
		for k, v := range stale {
			if !value.IsStaleNaN(v) {
				t.Errorf("%s = %v, want a stale marker", k, v)
			}
		}
	}
	if _, v := c.one(t, labels.MetricName, metricMessages, "app", "alpha"); v != 6 {
		t.Errorf("the message counters go on: alpha = %v, want 6", v)
	}
}

func TestLogMetricsHostPairsBound(t *testing.T) {
	c := &capture{}
	h := start(t, t.TempDir(), func(cfg *Config) {
		metricsConfig(c)(cfg)
		cfg.Metrics.MaxHostPairs = 3
	})
	lines, n := sshLines(5)
	sendTCP(t, h.tcpAddr(), lines)
	h.waitAccepted(t, uint64(n))
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, v := c.one(t, labels.MetricName, metricPatternHosts); v != 3 {
		t.Errorf("pattern hosts = %v, want the bound 3", v)
	}
	if _, v := c.one(t, labels.MetricName, metricHostsDropped); v != 4+5 {
		t.Errorf("dropped = %v, want the 9 messages of cn03 and cn04", v)
	}
}

func TestLogMetricsMonotonicAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	c := &capture{}
	h := start(t, dir, metricsConfig(c))
	lines, n := sshLines(3)
	sendTCP(t, h.tcpAddr(), lines)
	h.waitAccepted(t, uint64(n))
	h.stop() // saves the state

	c2 := &capture{}
	h = start(t, dir, metricsConfig(c2))
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, v := c2.one(t, labels.MetricName, metricMessages, "app", "sshd"); v != float64(n) {
		t.Errorf("after restart: %v messages, want %d", v, n)
	}
	if _, v := c2.one(t, labels.MetricName, metricNewPatterns); v != 1 {
		t.Errorf("after restart: %v new patterns, want 1", v)
	}
	sendTCP(t, h.tcpAddr(), lines)
	h.waitAccepted(t, uint64(n))
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	ls, v := c2.one(t, labels.MetricName, metricMessages, "app", "sshd")
	if v != float64(2*n) {
		t.Errorf("after more messages: %v, want %d", v, 2*n)
	}
	// Restored counters go on from their value: no zero sample.
	if hist := c2.history[ls.String()]; !slices.Equal(hist, []float64{float64(n), float64(2 * n)}) {
		t.Errorf("%s written as %v after a restart, want [%d %d]", ls, hist, n, 2*n)
	}
}

func TestNewPatternEventOnStream(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var got []events.Event
	sink := events.SinkFunc(func(e events.Event) { mu.Lock(); got = append(got, e); mu.Unlock() })
	h := start(t, dir, func(cfg *Config) { cfg.Events = sink })
	long := strings.Repeat("x", 300)
	sendTCP(t, h.tcpAddr(), "<13>Jan  5 10:00:00 cn07 slurmd: launch failed "+long+"\n<13>Jan  5 10:00:00 cn08 slurmd: launch failed "+long+"\n")
	h.waitAccepted(t, 2)
	mu.Lock()
	if len(got) != 1 {
		t.Fatalf("want one event for one new pattern, have %+v", got)
	}
	e := got[0]
	mu.Unlock()
	id := e.Labels["pattern"]
	if e.Kind != events.KindLogPattern || e.Severity != events.SeverityInfo || e.Node != "cn07" || e.Labels["app"] != "slurmd" {
		t.Errorf("event %+v", e)
	}
	prefix := "new log pattern " + id + " from slurmd@cn07: slurmd: launch failed "
	if !strings.HasPrefix(e.Summary, prefix) || len(e.Summary) != len(prefix)-len("slurmd: launch failed ")+maxSummaryTemplate {
		t.Errorf("summary %q (%d bytes), want %q and the template cut at %d bytes", e.Summary, len(e.Summary), prefix, maxSummaryTemplate)
	}
	if e.Link != "#/logs?q=pattern%3A"+id || id == "" || id == "0" {
		t.Errorf("link %q", e.Link)
	}
	if time.Since(e.Time) > time.Minute {
		t.Errorf("time %v", e.Time)
	}

	// Mined again at start-up (the saved state lost, as after a crash
	// before the first save): recorded, not emitted twice.
	h.stop()
	mu.Lock()
	got = nil
	mu.Unlock()
	os.Remove(filepath.Join(dir, statsFile))
	os.Remove(filepath.Join(dir, minerFile))
	h = start(t, dir, func(cfg *Config) { cfg.Events = sink })
	var er EventsResponse
	h.get(t, "/patterns/events", url.Values{"since": {"1h"}}, &er)
	if len(er.Events) != 1 {
		t.Errorf("replay recorded %d new-pattern events, want 1", len(er.Events))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Errorf("replay emitted %+v", got)
	}
}

func TestLabelValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"sshd", 64, "sshd"},
		{"a\xffb", 64, "a\uFFFDb"},
		{strings.Repeat("é", 10), 5, "éé"}, // cut on a rune boundary
		{"", 5, ""},
	} {
		if got := labelValue(c.in, c.max); got != c.want {
			t.Errorf("labelValue(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

// TestLogMetricsEvictedPatternEnds: the series of a pattern the miner
// evicts ends with a stale marker instead of lingering or folding into
// another pattern's counter.
func TestLogMetricsEvictedPatternEnds(t *testing.T) {
	c := &capture{}
	h := start(t, t.TempDir(), func(cfg *Config) {
		metricsConfig(c)(cfg)
		cfg.MaxPatterns = 2
	})
	sendTCP(t, h.tcpAddr(), "<13>Jan  5 10:00:00 cn01 alpha: ready\n<13>Jan  5 10:00:00 cn01 beta: ready\n")
	h.waitAccepted(t, 2)
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	alpha, _ := c.one(t, labels.MetricName, metricMessages, "app", "alpha")
	sendTCP(t, h.tcpAddr(), "<13>Jan  5 10:00:01 cn01 gamma: ready\n")
	h.waitAccepted(t, 3)
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := c.last(t, labels.MetricName, metricMessages, "app", "alpha"); !value.IsStaleNaN(got[alpha.String()]) || len(got) != 1 {
		t.Errorf("evicted pattern's series: %v, want a stale marker", got)
	}
	if _, v := c.one(t, labels.MetricName, metricMessages, "app", "gamma"); v != 1 {
		t.Errorf("gamma = %v, want 1", v)
	}
	if _, v := c.one(t, labels.MetricName, metricMessages, "app", "beta"); v != 1 {
		t.Errorf("beta = %v, want 1", v)
	}
}

// TestLogMetricsTopHostsMembership: a host busier than the view's member
// takes its place; the member's series ends with a stale marker.
func TestLogMetricsTopHostsMembership(t *testing.T) {
	c := &capture{}
	h := start(t, t.TempDir(), func(cfg *Config) {
		metricsConfig(c)(cfg)
		cfg.Metrics.TopHosts = 1
	})
	msgs := func(host string, n int) string {
		return strings.Repeat("<13>Jan  5 10:00:00 "+host+" slurmd: node drained\n", n)
	}
	sendTCP(t, h.tcpAddr(), msgs("cn01", 3)+msgs("cn02", 1))
	h.waitAccepted(t, 4)
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	if ls, v := c.one(t, labels.MetricName, metricMessagesByHost); ls.Get("host") != "cn01" || v != 3 {
		t.Fatalf("top host %s = %v, want cn01 with 3", ls, v)
	}
	sendTCP(t, h.tcpAddr(), msgs("cn02", 5))
	h.waitAccepted(t, 9)
	if err := h.svc.writeMetrics(time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, v := c.one(t, labels.MetricName, metricMessagesByHost, "host", "cn02"); v != 6 {
		t.Errorf("cn02 = %v, want its 6 messages", v)
	}
	if _, v := c.one(t, labels.MetricName, metricMessagesByHost, "host", "cn01"); !value.IsStaleNaN(v) {
		t.Errorf("cn01 = %v, want a stale marker", v)
	}
	if _, v := c.one(t, labels.MetricName, metricPatternHosts); v != 2 {
		t.Errorf("pattern hosts = %v, want 2", v)
	}
}
