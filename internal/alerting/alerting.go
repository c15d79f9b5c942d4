// Package alerting runs Prometheus alerting and recording rules over
// Vigil's store with Prometheus' own rules engine (prometheus/rules) and
// sends the alerts to Alertmanager with its notifier (prometheus/notifier):
// what is Prometheus' stays Prometheus', Vigil adds the wiring, the query
// limits, reloads, the Prometheus-shaped API and events (docs/alerting.md).
package alerting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/events"
)

// Defaults of Options fields left zero: Prometheus' own.
const (
	DefaultInterval        = 15 * time.Second
	DefaultResendDelay     = time.Minute
	DefaultForGracePeriod  = 10 * time.Minute
	DefaultOutageTolerance = time.Hour
	DefaultQueueCapacity   = 10000
)

// QueryFunc evaluates one rule expression at a time (query.API.RuleInstant).
type QueryFunc = rules.QueryFunc

// Options configure a Manager.
type Options struct {
	// Files are rule files or globs of them (Prometheus' rule format).
	Files []string
	// Interval is the evaluation interval of groups that set none.
	Interval time.Duration
	// Query evaluates an expression under the server's query limits.
	Query QueryFunc
	// Appendable takes recording rules' results and ALERTS /
	// ALERTS_FOR_STATE; Queryable reads ALERTS_FOR_STATE back after a
	// restart, so `for` survives it.
	Appendable storage.Appendable
	Queryable  storage.Queryable
	// Alertmanagers are base URLs of Alertmanagers (API v2), all sent
	// every alert (an HA pair or cluster dedups).
	Alertmanagers []string
	// ExternalURL prefixes alerts' generator URLs (this server's URL).
	ExternalURL string
	// MaxConcurrent bounds rule queries run at once (0: half the cores,
	// at least 1), so rules never take every core from ingest.
	MaxConcurrent int
	// ResendDelay, ForGracePeriod, OutageTolerance and QueueCapacity are
	// Prometheus' settings of the same names (0: Prometheus' defaults).
	ResendDelay     time.Duration
	ForGracePeriod  time.Duration
	OutageTolerance time.Duration
	QueueCapacity   int
	// Events gets an event for each alert that starts firing or resolves
	// (nil: discarded).
	Events events.Sink
	// Registerer gets the engine's (prometheus_rule_*), the notifier's
	// (prometheus_notifications_*) and Vigil's (vigil_rules_*) metrics.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Manager loads, reloads and evaluates the rules and serves their API.
type Manager struct {
	opts  Options
	log   *slog.Logger
	rules *rules.Manager
	notif *notifier.Manager // nil without Alertmanagers
	tgs   map[string][]*targetgroup.Group
	sem   chan struct{}
	ctx   context.Context // the rules' queries; cancelled when Run ends
	stop  context.CancelFunc

	mu      sync.Mutex // serialises loads
	running bool

	reloadOK   prometheus.Gauge
	reloadTime prometheus.Gauge

	errMu   sync.Mutex
	lastErr map[string]string // rule expression → last error, logged once per change

	alertMu sync.Mutex
	firing  map[string]map[uint64]firingAlert // group key → alert label hash
}

type firingAlert struct {
	labels, annotations labels.Labels
}

// New checks the options and the rule files (errors name file:line) and
// builds the engine; Run loads the rules and evaluates them.
func New(o Options) (*Manager, error) {
	if o.Query == nil || o.Appendable == nil || o.Queryable == nil {
		return nil, errors.New("alerting: Query, Appendable and Queryable are required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.ResendDelay <= 0 {
		o.ResendDelay = DefaultResendDelay
	}
	if o.ForGracePeriod <= 0 {
		o.ForGracePeriod = DefaultForGracePeriod
	}
	if o.OutageTolerance <= 0 {
		o.OutageTolerance = DefaultOutageTolerance
	}
	if o.QueueCapacity <= 0 {
		o.QueueCapacity = DefaultQueueCapacity
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if o.Events == nil {
		o.Events = events.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: o, log: o.Logger, sem: make(chan struct{}, o.MaxConcurrent),
		lastErr: map[string]string{}, firing: map[string]map[uint64]firingAlert{}}
	m.ctx, m.stop = context.WithCancel(context.Background())
	m.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vigil_rules_last_reload_successful",
		Help: "Whether the last load of the rule files succeeded (1) or failed, keeping the rules before it (0).",
	})
	m.reloadTime = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vigil_rules_last_reload_success_timestamp_seconds",
		Help: "Unix time of the last successful load of the rule files.",
	})
	if o.Registerer != nil {
		o.Registerer.MustRegister(m.reloadOK, m.reloadTime)
	}
	if _, err := m.check(); err != nil {
		return nil, err
	}
	var notify rules.NotifyFunc = func(context.Context, string, ...*rules.Alert) {}
	if len(o.Alertmanagers) > 0 {
		if err := m.newNotifier(); err != nil {
			return nil, err
		}
		notify = rules.SendAlerts(m.notif, o.ExternalURL)
	}
	ext, _ := url.Parse(o.ExternalURL)
	m.rules = rules.NewManager(&rules.ManagerOptions{
		NameValidationScheme: model.UTF8Validation,
		ExternalURL:          ext,
		QueryFunc:            m.query,
		NotifyFunc:           notify,
		Context:              m.ctx,
		Appendable:           o.Appendable,
		Queryable:            o.Queryable,
		Logger:               slog.New(quietHandler{o.Logger.Handler()}),
		Registerer:           o.Registerer,
		OutageTolerance:      o.OutageTolerance,
		ForGracePeriod:       o.ForGracePeriod,
		ResendDelay:          o.ResendDelay,
	})
	return m, nil
}

// Run loads the rules, evaluates them and sends alerts until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	err := m.load()
	m.running = true
	m.mu.Unlock()
	if err != nil {
		// New checked the files: they changed since. Run with none until
		// a reload succeeds rather than stop the server.
		m.log.Error("rules not loaded", "err", err)
	}
	var wg sync.WaitGroup
	if m.notif != nil {
		tsets := make(chan map[string][]*targetgroup.Group, 1)
		tsets <- m.tgs
		wg.Go(func() { m.notif.Run(tsets) })
	}
	wg.Go(m.rules.Run)
	<-ctx.Done()
	m.stop() // in-flight queries end now, not at their timeout
	m.rules.Stop()
	if m.notif != nil {
		m.notif.Stop()
	}
	wg.Wait()
	return nil
}

// Reload reads the rule files again. On an error (logged with file:line)
// the rules loaded before keep running.
func (m *Manager) Reload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		_, err := m.check()
		return err
	}
	return m.load()
}

// load checks the files, then hands them to the engine, which keeps the
// state of unchanged groups. Called with mu held.
func (m *Manager) load() error {
	files, err := m.check()
	if err != nil {
		m.reloadOK.Set(0)
		m.log.Error("loading rule files failed; the previous rules keep running", "err", err)
		return err
	}
	if err := m.rules.Update(m.opts.Interval, files, labels.EmptyLabels(), m.opts.ExternalURL, m.evalIteration); err != nil {
		m.reloadOK.Set(0)
		return fmt.Errorf("rules: %w", err)
	}
	m.reloadOK.Set(1)
	m.reloadTime.SetToCurrentTime()
	n, keys := 0, map[string]bool{}
	for _, g := range m.rules.RuleGroups() {
		n += len(g.Rules())
		keys[rules.GroupKey(g.File(), g.Name())] = true
	}
	m.dropGroups(keys)
	m.log.Info("rules loaded", "files", len(files), "rules", n)
	return nil
}

// check expands the globs and parses every file.
func (m *Manager) check() ([]string, error) {
	files, err := expand(m.opts.Files)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, f := range files {
		if _, err := parseFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	return files, errors.Join(errs...)
}

// query runs one rule expression: at most MaxConcurrent at once, each
// within the default interval, so one slow rule cannot hold its group for
// longer; a failure is logged once per change of its error.
func (m *Manager) query(ctx context.Context, qs string, t time.Time) (promql.Vector, error) {
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-m.sem }()
	ctx, cancel := context.WithTimeout(ctx, m.opts.Interval)
	defer cancel()
	v, err := m.opts.Query(ctx, qs, t)
	m.noteResult(qs, err)
	return v, err
}

func (m *Manager) noteResult(qs string, err error) {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	prev, failed := m.lastErr[qs]
	switch {
	case err == nil && failed:
		delete(m.lastErr, qs)
		m.log.Info("rule evaluates again", "expr", qs)
	case err != nil && (!failed || prev != err.Error()):
		if errors.Is(err, context.Canceled) && m.ctx.Err() != nil {
			return // stopping
		}
		m.lastErr[qs] = err.Error()
		m.log.Warn("rule evaluation failed (logged again only when its error changes)", "expr", qs, "err", err)
	}
}

// quietHandler drops the engine's log line for every failed evaluation
// (each interval, each rule): query logs failures once per change instead.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "Evaluating rule failed" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
