// Package health reports the node health checks of internal/health:
// the checks run on their own schedule in the runner's goroutines, and
// each tick copies the latest results, rendered once per change.
package health

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/health"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

// DefaultReport is how often results are reported: they change at most
// once a check interval (60 s by default).
const DefaultReport = 10 * time.Second

// firstWait bounds how long the first tick waits for the first round of
// checks (so `vigil sample --once` shows them); later ticks never wait.
const firstWait = 2 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "health",
		Description: "node health checks (mounts, free space, processes, hardware, scripts) run on their own schedule: vigil_health_check_*{check}",
		// Runs by default, but only where checks are configured: Init
		// reports ErrNotAvailable otherwise.
		Default:      true,
		NewConfig:    func() sampler.Configurable { return DefaultConfig() },
		New:          func(c sampler.Configurable) sampler.Plugin { return New(c.(*Config)) },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.health] table. Its interval is the checks'
// (every plugin's other tables use it for sampling); how often the results
// are reported is report_interval.
type Config struct {
	Interval    sampler.Duration     `toml:"interval" comment:"run each check every (per-check interval overrides)"`
	Timeout     sampler.Duration     `toml:"timeout" comment:"a check's time limit (per-check timeout overrides)"`
	Concurrency int                  `toml:"concurrency" comment:"checks running at once"`
	Report      sampler.Duration     `toml:"report_interval" comment:"how often the latest results are reported"`
	Check       []health.CheckConfig `toml:"check" comment:"the checks"`

	common sampler.Common
}

// CommonConfig gives the scheduler the reporting interval.
func (c *Config) CommonConfig() *sampler.Common {
	c.common.Interval = c.Report
	return &c.common
}

// DefaultConfig returns the defaults (no checks).
func DefaultConfig() *Config {
	return &Config{Interval: sampler.Duration(health.DefaultInterval), Timeout: sampler.Duration(health.DefaultTimeout),
		Concurrency: health.DefaultConcurrency, Report: sampler.Duration(DefaultReport)}
}

// Validate checks the table and every check.
func (c *Config) Validate() error {
	_, err := c.compile()
	return err
}

func (c *Config) compile() ([]*health.Check, error) {
	var errs []error
	if d := c.Interval.D(); d < time.Second || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("interval must be between 1s and 24h, got %v", d))
	}
	if d := c.Timeout.D(); d < 10*time.Millisecond || d > time.Hour {
		errs = append(errs, fmt.Errorf("timeout must be between 10ms and 1h, got %v", d))
	}
	if c.Concurrency < 1 || c.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("concurrency must be between 1 and 64, got %d", c.Concurrency))
	}
	if d := c.Report.D(); d < time.Second || d > time.Hour {
		errs = append(errs, fmt.Errorf("report_interval must be between 1s and 1h, got %v", d))
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, errors.New(strings.Join(msgs, "; ")) // one line: the loader reports it at the table
	}
	return health.Compile(c.Check, c.Interval.D(), c.Timeout.D())
}

// Series of one check with a result, in emission order.
const (
	sOK = iota
	sDuration
	sFailed
	sTimeouts
	nSeries
)

// check is what the plugin keeps per check: stable descriptors, and the
// failure descriptor of the current reason.
type check struct {
	descs   [nSeries]*metric.Desc
	failure *metric.Desc // nil while passing
	reason  string
}

// Plugin is the health plugin.
type Plugin struct {
	cfg    *Config
	runner *health.Runner
	checks []check
	st     []health.Status
	gen    uint64
	waited bool
	// The rendered tick: rebuilt when the runner has a new result.
	descs  []*metric.Desc
	values []float64
}

// New returns the plugin for cfg.
func New(cfg *Config) *Plugin { return &Plugin{cfg: cfg} }

// Init compiles the checks and starts the runner; without checks the
// plugin is not available (and costs nothing).
func (p *Plugin) Init(env sampler.Env) error {
	checks, err := p.cfg.compile()
	if err != nil {
		return err
	}
	if len(checks) == 0 {
		return fmt.Errorf("no checks configured: %w", sampler.ErrNotAvailable)
	}
	p.checks = make([]check, len(checks))
	for i, c := range checks {
		p.checks[i].descs = [nSeries]*metric.Desc{
			metric.NewDesc("vigil_health_check_ok", "1 if the health check passed on its last run, 0 if it failed.", metric.Gauge, "check", c.Name),
			metric.NewDesc("vigil_health_check_duration_seconds", "How long the health check's last run took.", metric.Gauge, "check", c.Name),
			metric.NewDesc("vigil_health_checks_failed_total", "Runs of the health check that failed (timeouts included).", metric.Counter, "check", c.Name),
			metric.NewDesc("vigil_health_check_timeouts_total", "Runs of the health check that timed out (commands killed with their process group).", metric.Counter, "check", c.Name),
		}
	}
	p.runner = health.NewRunner(checks, env.FS, p.cfg.Concurrency, env.Logger)
	p.runner.Start()
	return nil
}

// Sample appends the latest results; it waits only on the first tick,
// at most firstWait, for the first round.
func (p *Plugin) Sample(ctx context.Context, _ time.Time, b *metric.Batch) error {
	if !p.waited {
		p.waited = true
		t := time.NewTimer(firstWait)
		select {
		case <-p.runner.FirstRound():
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if g := p.runner.Gen(); g != p.gen || p.descs == nil {
		p.gen = g
		p.render()
	}
	for i, d := range p.descs {
		b.Add(d, p.values[i])
	}
	return nil
}

// render rebuilds the tick from the runner's statuses; it allocates only
// when a failure reason changes.
func (p *Plugin) render() {
	p.st = p.runner.Snapshot(p.st)
	p.descs, p.values = p.descs[:0], p.values[:0]
	add := func(d *metric.Desc, v float64) {
		p.descs = append(p.descs, d)
		p.values = append(p.values, v)
	}
	for i := range p.st {
		s, c := &p.st[i], &p.checks[i]
		if !s.Done {
			continue
		}
		ok := 0.0
		if s.OK {
			ok = 1
		}
		add(c.descs[sOK], ok)
		add(c.descs[sDuration], s.Duration.Seconds())
		if s.OK {
			c.failure, c.reason = nil, ""
		} else {
			if c.failure == nil || c.reason != s.Reason {
				c.failure = metric.NewDesc("vigil_health_check_failure", "1 while the health check fails, with the first line of its output or message as the reason.",
					metric.Gauge, "check", s.Name, "reason", s.Reason)
				c.reason = s.Reason
			}
			add(c.failure, 1)
		}
		add(c.descs[sFailed], float64(s.Failed))
		add(c.descs[sTimeouts], float64(s.Timeouts))
	}
	if p.descs == nil {
		p.descs = []*metric.Desc{} // rendered, nothing yet
	}
}

// Close stops the checks (running commands are killed).
func (p *Plugin) Close() error {
	if p.runner != nil {
		p.runner.Close()
	}
	return nil
}
