package logsvc

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// Logs as rule inputs (docs/logs.md): every MetricsConfig.Interval the
// service writes per-pattern counters into the server's store, so PromQL
// rules and the dashboard read them like any series.
const (
	metricMessages       = "vigil_log_messages_total"
	metricMessagesByHost = "vigil_log_messages_by_host_total"
	metricNewPatterns    = "vigil_log_new_patterns_total"
	metricPatternHosts   = "vigil_log_pattern_hosts"
	metricFirstSeen      = "vigil_log_pattern_first_seen_timestamp_seconds"
	metricFolded         = "vigil_log_messages_folded_total"
	metricHostsDropped   = "vigil_log_host_tracking_dropped_total"
)

// Defaults of MetricsConfig.
const (
	DefaultMetricsInterval  = 15 * time.Second
	DefaultMaxPatternSeries = 5000
	DefaultMaxHostSeries    = 1000
	DefaultTopHosts         = 20
	DefaultMaxHostPairs     = 100_000
	// PatternHostsWindow is the window of vigil_log_pattern_hosts.
	PatternHostsWindow = 5 * time.Minute
	// OtherPattern is the pattern (and app) label of messages beyond
	// MaxPatternSeries.
	OtherPattern = "other"

	maxAppLabel  = 64
	maxHostLabel = 128
)

// MetricsConfig makes the service keep message counts per pattern as
// series in a store. Without Appendable nothing is counted or written.
type MetricsConfig struct {
	Appendable storage.Appendable
	// Interval between writes; 0: DefaultMetricsInterval.
	Interval time.Duration
	// MaxPatternSeries bounds the {pattern, app, severity} label sets of
	// vigil_log_messages_total; messages beyond it are counted under
	// pattern="other", app="other". 0: DefaultMaxPatternSeries.
	MaxPatternSeries int
	// MaxHostSeries bounds vigil_log_messages_by_host_total in all, and
	// TopHosts per pattern; 0: DefaultMaxHostSeries, DefaultTopHosts.
	MaxHostSeries int
	TopHosts      int
	// MaxHostPairs bounds the (pattern, host) pairs tracked for the two
	// host views; it is also the ceiling of vigil_log_pattern_hosts.
	// 0: DefaultMaxHostPairs.
	MaxHostPairs int
	// Labels are added to every series: the server's own job, instance
	// and node, as its self-metrics have.
	Labels labels.Labels
	// Metadata, when set, is told each metric's type and help once.
	Metadata func(name, typ, help string)
}

func (c MetricsConfig) withDefaults() MetricsConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultMetricsInterval
	}
	if c.MaxPatternSeries <= 0 {
		c.MaxPatternSeries = DefaultMaxPatternSeries
	}
	if c.MaxHostSeries <= 0 {
		c.MaxHostSeries = DefaultMaxHostSeries
	}
	if c.TopHosts <= 0 {
		c.TopHosts = DefaultTopHosts
	}
	if c.MaxHostPairs <= 0 {
		c.MaxHostPairs = DefaultMaxHostPairs
	}
	return c
}

type counterKey struct {
	pattern uint64
	app     string // sanitised label value
	sev     uint8
}

type hostKey struct {
	pattern uint64
	host    string // sanitised label value
}

type hostCount struct {
	total     uint64 // messages since the pair was first tracked
	cur, prev uint64 // messages in the current and the previous period
	period    int64  // the current period: Unix seconds / topHostsPeriod
	last      int64  // newest message, Unix seconds
}

// topHostsPeriod is the period the top-hosts view ranks by: a host's
// messages in the current and the previous one, the last 5 to 10 minutes,
// so membership does not flap with every quiet interval.
const topHostsPeriod = 300

// roll makes p the current period, if it is later.
func (h *hostCount) roll(p int64) {
	switch {
	case p <= h.period:
	case p == h.period+1:
		h.prev, h.cur = h.cur, 0
	default:
		h.prev, h.cur = 0, 0
	}
	h.period = max(h.period, p)
}

// logCounters is the counting state, guarded by Service.mu. The message
// counters and the new-pattern count are saved with the pattern state, so
// they stay monotonic across restarts; the host views start again.
type logCounters struct {
	msgs        map[counterKey]*uint64  // a pointer: one map lookup per message
	fresh       map[counterKey]struct{} // counted first since the last write
	other       [9]uint64               // by severity; [8] for out-of-range values
	folded      uint64
	newPatterns uint64
	hosts       map[hostKey]*hostCount
	dropped     uint64
	restoring   bool // mining what was stored after the last save

	// Writer state, used only by writeMetrics.
	written map[uint64]labels.Labels // series written last time, by hash
	meta    bool                     // metadata sent
}

func newLogCounters() *logCounters {
	return &logCounters{msgs: map[counterKey]*uint64{}, fresh: map[counterKey]struct{}{}, hosts: map[hostKey]*hostCount{}}
}

// savedCounters is logCounters on disk (patterns.json).
type savedCounters struct {
	Messages    []savedCount `json:"messages"`
	Other       [9]uint64    `json:"other"`
	Folded      uint64       `json:"folded"`
	NewPatterns uint64       `json:"new_patterns"`
}

type savedCount struct {
	Pattern  uint64 `json:"pattern"`
	App      string `json:"app"`
	Severity uint8  `json:"severity"`
	Count    uint64 `json:"count"`
}

func (c *logCounters) save() *savedCounters {
	sc := &savedCounters{Other: c.other, Folded: c.folded, NewPatterns: c.newPatterns}
	sc.Messages = make([]savedCount, 0, len(c.msgs))
	for k, v := range c.msgs {
		sc.Messages = append(sc.Messages, savedCount{Pattern: k.pattern, App: k.app, Severity: k.sev, Count: *v})
	}
	return sc
}

func (c *logCounters) load(sc *savedCounters, maxSeries int) {
	c.other, c.folded, c.newPatterns = sc.Other, sc.Folded, sc.NewPatterns
	for _, m := range sc.Messages {
		if len(c.msgs) >= maxSeries {
			break // the bound was lowered: the rest start again as "other"
		}
		n := m.Count
		c.msgs[counterKey{m.Pattern, labelValue(m.App, maxAppLabel), min(m.Severity, 8)}] = &n
	}
}

// count adds one mined message. Called with Service.mu held; allocates
// only for a label set or host seen for the first time.
func (s *Service) count(r *logstore.Record, isNew bool) {
	c := s.counters
	if c == nil {
		return
	}
	if isNew {
		c.newPatterns++
	}
	sev := min(r.Severity, 8)
	k := counterKey{r.Pattern, labelValue(r.App, maxAppLabel), sev}
	if n := c.msgs[k]; n != nil {
		*n++
	} else if len(c.msgs) < s.mcfg.MaxPatternSeries {
		k.app = clone(k.app)
		one := uint64(1)
		c.msgs[k] = &one
		if !c.restoring { // those may have been written before a crash
			c.fresh[k] = struct{}{}
		}
	} else {
		c.other[sev]++
		c.folded++
	}
	hk := hostKey{r.Pattern, labelValue(r.Host, maxHostLabel)}
	h := c.hosts[hk]
	if h == nil {
		if len(c.hosts) >= s.mcfg.MaxHostPairs {
			c.dropped++
			return
		}
		hk.host = clone(hk.host)
		h = &hostCount{}
		c.hosts[hk] = h
	}
	t := r.Received.Unix()
	h.roll(t / topHostsPeriod)
	h.total++
	h.cur++ // a late message counts in the current period
	h.last = max(h.last, t)
}

// labelValue makes s a bounded, valid UTF-8 label value; s itself when it
// is one already (no copy).
func labelValue(s string, maxLen int) string {
	if len(s) <= maxLen && utf8.ValidString(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxLen {
		return s
	}
	n := maxLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func severityLabel(sev uint8) string {
	if n := syslog.SeverityName(sev); n != "" {
		return n
	}
	return "unknown"
}

// sample is one value to write, gathered under the lock.
type sample struct {
	name    string
	pattern string
	app     string
	sev     string
	host    string
	v       float64
	// zeroFirst: a counter this process created, written at 0 just
	// before its first value, so that increase() and rate() count the
	// messages of its first interval (a burst of a new pattern) as
	// Prometheus' created-timestamp zero samples do.
	zeroFirst bool
}

// runMetrics writes the counters every interval until ctx ends.
func (s *Service) runMetrics(ctx context.Context) {
	t := time.NewTicker(s.mcfg.Interval)
	defer t.Stop()
	var failed logging.OnChange // each kind of failure once, not once per interval
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			failed.Warn(s.log, "storing log pattern metrics", s.writeMetrics(now))
		}
	}
}

// writeMetrics appends the current counters at now, and stale markers for
// the series written last time that are gone (patterns merged or evicted,
// hosts that left the top view), so they end at once in PromQL.
func (s *Service) writeMetrics(now time.Time) error {
	c := s.counters
	if c == nil {
		return nil
	}
	if !c.meta && s.mcfg.Metadata != nil {
		md := s.mcfg.Metadata
		md(metricMessages, "counter", "Log messages by pattern, app and syslog severity; beyond the series bound under pattern=\"other\".")
		md(metricMessagesByHost, "counter", "Log messages by host and pattern for the top hosts of each pattern in the last 5 to 10 minutes; membership changes.")
		md(metricNewPatterns, "counter", "Log patterns seen for the first time.")
		md(metricPatternHosts, "gauge", "Distinct hosts that logged the pattern in the last 5 minutes.")
		md(metricFirstSeen, "gauge", "When the pattern was first seen, Unix seconds.")
		md(metricFolded, "counter", "Log messages counted under pattern=\"other\" because the series bound was reached.")
		md(metricHostsDropped, "counter", "Log messages whose (pattern, host) pair was not tracked because the bound was reached.")
		c.meta = true
	}
	samples := s.gatherMetrics(now)
	ts := now.UnixMilli()
	app := s.mcfg.Appendable.Appender(context.Background())
	written := make(map[uint64]labels.Labels, len(samples))
	var b labels.ScratchBuilder
	var aerr error
	for i := range samples {
		sm := &samples[i]
		b.Reset()
		b.Add(labels.MetricName, sm.name)
		s.mcfg.Labels.Range(func(l labels.Label) { b.Add(l.Name, l.Value) })
		if sm.pattern != "" {
			b.Add("pattern", sm.pattern)
		}
		if sm.app != "" { // an empty value is no label
			b.Add("app", sm.app)
		}
		if sm.sev != "" {
			b.Add("severity", sm.sev)
		}
		if sm.host != "" {
			b.Add("host", sm.host)
		}
		b.Sort()
		ls := b.Labels()
		written[ls.Hash()] = ls
		if sm.zeroFirst {
			if _, err := app.Append(0, ls, ts-1, 0); err != nil && aerr == nil {
				aerr = fmt.Errorf("append %s: %w", ls, err)
			}
		}
		if _, err := app.Append(0, ls, ts, sm.v); err != nil && aerr == nil {
			aerr = fmt.Errorf("append %s: %w", ls, err)
		}
	}
	for h, ls := range c.written {
		if _, ok := written[h]; !ok {
			if _, err := app.Append(0, ls, ts, math.Float64frombits(value.StaleNaN)); err != nil && aerr == nil {
				aerr = fmt.Errorf("append stale marker %s: %w", ls, err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	c.written = written
	return aerr
}

// gatherMetrics reads the counters into samples. It picks the top hosts
// and forgets quiet pairs and the counters of patterns that no longer
// exist.
func (s *Service) gatherMetrics(now time.Time) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counters
	out := make([]sample, 0, len(c.msgs)+s.mcfg.MaxHostSeries+2*s.miner.Len()+16)
	out = append(out,
		sample{name: metricNewPatterns, v: float64(c.newPatterns)},
		sample{name: metricFolded, v: float64(c.folded)},
		sample{name: metricHostsDropped, v: float64(c.dropped)})
	for sev, n := range c.other {
		if n > 0 {
			out = append(out, sample{name: metricMessages, pattern: OtherPattern, app: OtherPattern, sev: severityLabel(uint8(sev)), v: float64(n)})
		}
	}
	for k, n := range c.msgs {
		// A merged pattern's messages go on under the survivor's id and
		// an evicted one's under a new id: drop the old counter (its
		// series ends with a stale marker) rather than fold it into
		// another, which would read as a burst of messages.
		_, fresh := c.fresh[k]
		if to, ok := s.miner.Resolve(k.pattern); !ok || to != k.pattern {
			delete(c.msgs, k)
			continue
		}
		out = append(out, sample{name: metricMessages, pattern: strconv.FormatUint(k.pattern, 10), app: k.app, sev: severityLabel(k.sev), v: float64(*n), zeroFirst: fresh})
	}
	clear(c.fresh)

	// Host views: pairs of merged patterns join the survivor's (recent
	// counts only: adding totals would read as a burst).
	nowPeriod := now.Unix() / topHostsPeriod
	for k, h := range c.hosts {
		to, ok := s.miner.Resolve(k.pattern)
		if ok && to == k.pattern {
			continue
		}
		delete(c.hosts, k)
		if !ok {
			continue
		}
		nk := hostKey{to, k.host}
		if t := c.hosts[nk]; t != nil {
			t.roll(nowPeriod)
			h.roll(nowPeriod)
			t.cur += h.cur
			t.prev += h.prev
			t.last = max(t.last, h.last)
		} else {
			c.hosts[nk] = h
		}
	}
	recent := now.Add(-PatternHostsWindow).Unix()
	type cand struct {
		k hostKey
		h *hostCount
	}
	byPattern := map[uint64][]cand{}
	hostsOf := map[uint64]int{}
	for k, h := range c.hosts {
		h.roll(nowPeriod)
		if h.cur+h.prev == 0 {
			delete(c.hosts, k) // quiet for 5 minutes at least: a later message tracks it afresh
			continue
		}
		if h.last >= recent {
			hostsOf[k.pattern]++
		}
		byPattern[k.pattern] = append(byPattern[k.pattern], cand{k, h})
	}
	byCount := func(a, b cand) int {
		return cmp.Or(cmp.Compare(b.h.cur+b.h.prev, a.h.cur+a.h.prev), cmp.Compare(b.h.total, a.h.total),
			cmp.Compare(a.k.pattern, b.k.pattern), strings.Compare(a.k.host, b.k.host))
	}
	var view []cand
	for _, cs := range byPattern {
		slices.SortFunc(cs, byCount)
		view = append(view, cs[:min(len(cs), s.mcfg.TopHosts)]...)
	}
	slices.SortFunc(view, byCount)
	view = view[:min(len(view), s.mcfg.MaxHostSeries)]
	for _, v := range view {
		out = append(out, sample{name: metricMessagesByHost, pattern: strconv.FormatUint(v.k.pattern, 10), host: v.k.host, v: float64(v.h.total)})
	}
	for id, n := range hostsOf {
		p := strconv.FormatUint(id, 10)
		out = append(out, sample{name: metricPatternHosts, pattern: p, v: float64(n)})
		if pt, ok := s.miner.Pattern(id); ok {
			out = append(out, sample{name: metricFirstSeen, pattern: p, v: float64(pt.FirstSeen.UnixMilli()) / 1000})
		}
	}
	return out
}
