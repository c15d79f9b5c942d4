package server

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/jobs/report"
	"github.com/vigil-hpc/vigil/internal/store"
)

// StragglerMetric is the series the straggler watch writes: 1 while a
// running job's node is judged a straggler (docs/jobs.md), so alert rules
// can use it; a stale marker when it no longer is.
const StragglerMetric = "vigil_job_straggler"

// Bounds of the straggler watch. A round judges each running job of at
// least 3 nodes over its last stragglerWindow, as the report does over a
// whole job; jobs not reached within the round's budget are judged first
// next round, so a machine of thousands of jobs is covered in turns.
const (
	stragglerInterval = time.Minute
	stragglerWindow   = 15 * time.Minute
	stragglerMinNodes = 3
)

type stragglerKey struct{ job, node, metric string }

// stragglerWatch judges the running jobs and writes StragglerMetric.
type stragglerWatch struct {
	q        report.Querier
	jobs     *jobs.Manager
	appender func(context.Context) storage.Appender
	log      *slog.Logger
	interval time.Duration
	window   time.Duration
	budget   time.Duration // of one round; the rest waits for the next
	// flagged holds the series written last round: the ones not
	// flagged again get a stale marker.
	flagged map[stragglerKey]bool
	next    string // the job id the last round stopped before

	rounds, judged, errors prometheus.Counter
	current                prometheus.Gauge
}

func newStragglerWatch(q report.Querier, m *jobs.Manager, app func(context.Context) storage.Appender, reg prometheus.Registerer, log *slog.Logger) *stragglerWatch {
	w := &stragglerWatch{q: q, jobs: m, appender: app, log: log, interval: stragglerInterval, window: stragglerWindow,
		budget: stragglerInterval / 6, flagged: map[stragglerKey]bool{},
		rounds:  prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_straggler_rounds_total", Help: "Rounds of straggler judging over the running jobs."}),
		judged:  prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_straggler_jobs_judged_total", Help: "Running jobs judged for stragglers."}),
		errors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_straggler_errors_total", Help: "Straggler judgements that failed (query error or timeout)."}),
		current: prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_straggler_nodes", Help: "Nodes currently flagged as stragglers of a running job."}),
	}
	if reg != nil {
		reg.MustRegister(w.rounds, w.judged, w.errors, w.current)
	}
	return w
}

func (w *stragglerWatch) run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.round(ctx, time.Now())
	}
}

// round judges the running jobs at now and writes what changed.
func (w *stragglerWatch) round(ctx context.Context, now time.Time) {
	w.rounds.Inc()
	running, err := w.jobs.Index().List(jobs.Filter{State: jobs.StateRunning, Limit: jobs.MaxLimit})
	if err != nil {
		w.errors.Inc()
		w.log.Warn("straggler watch: list running jobs", "err", err)
		return
	}
	var cands []*jobs.Job
	for _, j := range running {
		if len(j.Nodes) >= stragglerMinNodes && !j.Start.IsZero() {
			cands = append(cands, j)
		}
	}
	// Judge in id order starting where the last round stopped.
	slices.SortFunc(cands, func(a, b *jobs.Job) int { return compareIDs(a.ID, b.ID) })
	first := 0
	if w.next != "" {
		first, _ = slices.BinarySearchFunc(cands, w.next, func(j *jobs.Job, id string) int { return compareIDs(j.ID, id) })
		if first >= len(cands) {
			first = 0
		}
	}
	deadline := time.Now().Add(w.budget)
	now2 := make(map[stragglerKey]bool, len(w.flagged))
	judgedIDs := map[string]bool{}
	w.next = ""
	for i := range cands {
		j := cands[(first+i)%len(cands)]
		if time.Now().After(deadline) || ctx.Err() != nil {
			w.next = j.ID
			break
		}
		judgedIDs[j.ID] = true
		jw := *j
		jw.Summary = nil // judge the samples, not an old summary
		if from := now.Add(-w.window); jw.Start.Before(from) {
			jw.Start = from
		}
		qctx, cancel := context.WithTimeout(ctx, w.budget)
		r, err := report.Build(qctx, w.q, jw, now)
		cancel()
		w.judged.Inc()
		if err != nil {
			w.errors.Inc()
			continue
		}
		for _, s := range r.Stragglers {
			now2[stragglerKey{s.Job, s.Node, s.Metric}] = true
		}
	}
	// Jobs not judged this round keep their verdicts until their turn.
	for k := range w.flagged {
		if !judgedIDs[k.job] && stillRunning(running, k.job) {
			now2[k] = true
		}
	}
	w.write(now, now2)
}

func stillRunning(running []*jobs.Job, id string) bool {
	for _, j := range running {
		if j.ID == id {
			return true
		}
	}
	return false
}

// write appends 1 for each flagged series and a stale marker for each
// series flagged before and not now.
func (w *stragglerWatch) write(now time.Time, flagged map[stragglerKey]bool) {
	if len(flagged) == 0 && len(w.flagged) == 0 {
		return
	}
	app := w.appender(context.Background())
	ts := now.UnixMilli()
	var b labels.ScratchBuilder
	add := func(k stragglerKey, v float64) {
		b.Reset()
		b.Add(labels.MetricName, StragglerMetric)
		b.Add("job", SelfJob)
		b.Add("instance", SelfNode)
		b.Add(store.NodeLabel, k.node)
		b.Add("jobid", k.job)
		b.Add("metric", k.metric)
		b.Sort()
		if _, err := app.Append(0, b.Labels(), ts, v); err != nil {
			w.log.Debug("straggler watch: append", "err", err)
		}
	}
	for k := range flagged {
		add(k, 1)
	}
	for k := range w.flagged {
		if !flagged[k] {
			add(k, math.Float64frombits(value.StaleNaN))
		}
	}
	if err := app.Commit(); err != nil {
		w.errors.Inc()
		w.log.Warn("straggler watch: commit", "err", err)
		return // try again next round with the same state
	}
	w.flagged = flagged
	w.current.Set(float64(len(flagged)))
}

// compareIDs orders Slurm job ids numerically where they are numbers.
func compareIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
