package server

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/alerting"
	"github.com/vigil-hpc/vigil/internal/bus"
	"github.com/vigil-hpc/vigil/internal/drain"
	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/logging"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/remotewrite"
	"github.com/vigil-hpc/vigil/internal/store"
)

// Config is the [server] table of vigil.toml. Package config decodes it
// (strictly, with file:line errors) because this package registers it;
// the lean sampler binary does not link this package and accepts the table
// unvalidated.
type Config struct {
	HTTP   string `toml:"http"`
	Listen string `toml:"listen"`
	Data   string `toml:"data"`
	// WebConfig is a Prometheus web configuration file (TLS, basic auth,
	// client certificates) applied to HTTP.
	WebConfig string `toml:"web_config"`
	// EnableRemoteWriteReceiver turns POST /api/v1/write on.
	EnableRemoteWriteReceiver bool `toml:"enable_remote_write_receiver"`
	// KeyFile holds the stream's shared key; without one only loopback
	// peers may connect to Listen.
	KeyFile string `toml:"key_file"`
	// Interval is the nodes' sampling interval; a node silent for three
	// of them is marked down.
	Interval Duration `toml:"interval"`
	// Job is the job label of every series the nodes send, beside
	// instance=NODE, as Prometheus labels a scraped node_exporter
	// (docs/grafana.md); empty means DefaultJob.
	Job string `toml:"job"`

	Retention        Duration `toml:"retention"`
	RetentionBytes   int64    `toml:"retention_bytes"`
	OutOfOrderWindow Duration `toml:"out_of_order_window"`
	// MaxFuture refuses samples further ahead of the server's clock; a
	// node whose clock is off by more is flagged as clock skew
	// (0: store.DefaultMaxFuture, 10m).
	MaxFuture Duration `toml:"max_future"`
	// MinFreeBytes is the free space kept on the data directory's file
	// system: below it the store is read-only (0: 128 MiB; negative: off).
	MinFreeBytes int64 `toml:"min_free_bytes"`
	// RollupRetention keeps one-minute min/max/mean/count rollups this
	// long beside the raw data (Retention); 0 means 400d. Both zero
	// values mean rollups on, so old configs get them.
	RollupRetention Duration `toml:"rollup_retention"`
	DisableRollups  bool     `toml:"disable_rollups"`

	QueryTimeout       Duration `toml:"query_timeout"`
	QueryMaxSamples    int      `toml:"query_max_samples"`
	QueryMaxConcurrent int      `toml:"query_max_concurrent"`
	// Query limits (issue 11; package query): heavy queries waiting for
	// a slot beyond QueryMaxQueued are refused with 503 and Retry-After;
	// longer expressions than QueryMaxLength bytes with 400; series,
	// labels and label values answer at most QueryMaxResults items.
	QueryMaxQueued  int `toml:"query_max_queued"`
	QueryMaxLength  int `toml:"query_max_length"`
	QueryMaxResults int `toml:"query_max_results"`
	// Series limits (issue 11; store/limits.go): new series per node and
	// per remote-write sender (by IP address) within 2h, and series in
	// the head overall; 0 means the default, negative no cap.
	MaxSeriesPerNode         int `toml:"max_series_per_node"`
	MaxSeriesPerRemoteSender int `toml:"max_series_per_remote_write_sender"`
	MaxHeadSeries            int `toml:"max_head_series"`
	// The stream listener's connection caps (wire_max_conns, …).
	config.WireLimits

	// Syslog intake (off unless an address is set); messages are kept
	// under Data/logs.
	// Topology groups nodes into racks or partitions for the dashboard
	// (a file of "GROUP: host-list" lines); listed nodes that never
	// connect are down (up=0).
	Topology string `toml:"topology"`

	SyslogUDP     string   `toml:"syslog_udp"`
	SyslogTCP     string   `toml:"syslog_tcp"`
	SyslogTLS     string   `toml:"syslog_tls"`
	SyslogTLSCert string   `toml:"syslog_tls_cert"`
	SyslogTLSKey  string   `toml:"syslog_tls_key"`
	LogsRetention Duration `toml:"logs_retention"`
	LogsMaxBytes  int64    `toml:"logs_max_bytes"`
	// Log patterns as rule inputs (docs/logs.md): message counts per
	// pattern are written into the store every LogsMetricsInterval
	// (0: 15s), at most LogsMaxPatternSeries label sets (0: 5000).
	LogsMetricsInterval  Duration `toml:"logs_metrics_interval"`
	LogsMaxPatternSeries int      `toml:"logs_max_pattern_series"`

	// SyslogRELP receives RELP (rsyslog omrelp), acknowledged once stored.
	SyslogRELP string `toml:"syslog_relp"`
	// Syslog connection limits (TCP, TLS, RELP) and the UDP receive
	// buffer; 0 takes the defaults of internal/logs/syslog, a negative
	// cap disables it.
	SyslogMaxConns        int      `toml:"syslog_max_conns"`
	SyslogMaxConnsPerHost int      `toml:"syslog_max_conns_per_host"`
	SyslogIdleTimeout     Duration `toml:"syslog_idle_timeout"`
	SyslogFrameTimeout    Duration `toml:"syslog_frame_timeout"`
	SyslogUDPBuffer       int      `toml:"syslog_udp_buffer"`

	// RemoteWrite forwards what the tree sends to these Prometheus
	// remote-write endpoints (issue 4; package remotewrite). A pointer
	// keeps Config comparable with ==.
	RemoteWrite *[]remotewrite.Config `toml:"remote_write"`

	// Slurm completes the job index (<data>/jobs, package jobs) from
	// `squeue --json` every SlurmInterval (0: 30s) and `scontrol show
	// job`, each bounded by SlurmTimeout (0: 10s); docs/jobs.md.
	Slurm         bool     `toml:"slurm"`
	SlurmSqueue   string   `toml:"slurm_squeue"`
	SlurmInterval Duration `toml:"slurm_interval"`
	SlurmTimeout  Duration `toml:"slurm_timeout"`
	// JobEvents takes POST /api/v1/jobs/{id}/event (vigil job-event in
	// Slurm's prologs and epilogs); off, as it stores what it is sent.
	JobEvents bool `toml:"job_events"`
	// EventsRetention keeps the event stream (<data>/events, package
	// events) this long; whole days go (0: 90d).
	EventsRetention Duration `toml:"events_retention"`
	// IORetention and IORetentionSize bound the per-file I/O records
	// (<data>/iorecords, package iorecords) by age (0: 30d) and bytes on
	// disk (0: 8 GiB); whole segments go.
	IORetention     Duration `toml:"io_retention"`
	IORetentionSize int64    `toml:"io_retention_size"`

	// Rules are Prometheus rule files or globs of them, evaluated every
	// RuleInterval (0: 15s); alerts go to the Alertmanager URLs
	// (package alerting, docs/alerting.md). Pointers keep Config
	// comparable with ==.
	Rules        *[]string `toml:"rules"`
	Alertmanager *[]string `toml:"alertmanager"`
	RuleInterval Duration  `toml:"rule_interval"`
	// DrainOnHealth drains a node whose health checks fail in Slurm and
	// resumes it once they pass, if Vigil drained it (package drain,
	// docs/drain.md); scontrol is looked for beside SlurmSqueue.
	DrainOnHealth bool `toml:"drain_on_health"`

	// Log is set by flags only.
	Log logging.Options `toml:"-"`
	// DebugPprof serves Go's profiles under /debug/pprof/ on HTTP (behind
	// its web config), for finding where memory and CPU go.
	DebugPprof bool `toml:"debug_pprof"`

	// AMQP publishes metrics, logs, events and jobs to RabbitMQ (package
	// bus, docs/bus.md); from the file's [amqp] table and --amqp.
	AMQP bus.Config `toml:"-"`
}

func init() {
	config.RegisterSection("server", func() any { c := DefaultConfig(); return &c })
}

// Validate implements config's section validation.
func (c *Config) Validate() error { return c.validate() }

// DefaultConfig is used where neither file nor flags say otherwise.
func DefaultConfig() Config {
	return Config{
		HTTP:      DefaultHTTP,
		Data:      DefaultData,
		Retention: Duration(store.DefaultRetention),
		Interval:  Duration(time.Second),
		Job:       DefaultJob,
	}
}

// DefaultJob is the job label of the nodes' series when Config.Job is
// empty: the job name node_exporter's scrape configs and dashboards use.
const DefaultJob = "node"

// SelfJob is the job label of the server's own metrics (selfmetrics.go).
const SelfJob = "vigil"

// job is the nodes' job label.
func (c Config) job() string {
	if c.Job == "" {
		return DefaultJob
	}
	return c.Job
}

// Duration is the one duration type of vigil.toml and the flags (Go or
// Prometheus syntax: "1.5s", "15d").
type Duration = duration.Duration

// LoadConfig reads the [server] table of path strictly (unknown keys are
// errors) and ignores the other tables, which belong to other daemons.
func LoadConfig(path string) (Config, error) {
	f, err := config.Load(path)
	if err != nil {
		return DefaultConfig(), err
	}
	return *f.Sections["server"].(*Config), nil
}

func (c Config) validate() error {
	var errs []error
	if c.HTTP == "" {
		errs = append(errs, config.Field("http", "empty address"))
	}
	if c.Data == "" {
		errs = append(errs, config.Field("data", "empty directory"))
	}
	for _, v := range []struct {
		key, flag string
		n         int64
	}{
		{"interval", "", int64(c.Interval)}, {"retention", "", int64(c.Retention)}, {"retention_bytes", "", c.RetentionBytes},
		{"out_of_order_window", "", int64(c.OutOfOrderWindow)}, {"max_future", "", int64(c.MaxFuture)}, {"rollup_retention", "", int64(c.RollupRetention)}, {"query_timeout", "", int64(c.QueryTimeout)},
		{"query_max_samples", "", int64(c.QueryMaxSamples)}, {"query_max_concurrent", "query-max-concurrency", int64(c.QueryMaxConcurrent)},
		{"query_max_queued", "", int64(c.QueryMaxQueued)}, {"query_max_length", "", int64(c.QueryMaxLength)}, {"query_max_results", "", int64(c.QueryMaxResults)},
		{"logs_retention", "", int64(c.LogsRetention)}, {"logs_max_bytes", "", c.LogsMaxBytes},
		{"logs_metrics_interval", "", int64(c.LogsMetricsInterval)}, {"logs_max_pattern_series", "", int64(c.LogsMaxPatternSeries)},
		{"slurm_interval", "", int64(c.SlurmInterval)}, {"rule_interval", "", int64(c.RuleInterval)}, {"slurm_timeout", "", int64(c.SlurmTimeout)},
		{"events_retention", "", int64(c.EventsRetention)},
		{"io_retention", "", int64(c.IORetention)}, {"io_retention_size", "", c.IORetentionSize},
	} {
		if v.n < 0 {
			errs = append(errs, &config.FieldError{Key: v.key, Flag: v.flag, Msg: "must not be negative"})
		}
	}
	if !utf8.ValidString(c.Job) || len(c.Job) > 128 || c.Job == SelfJob {
		errs = append(errs, config.Field("job", "%q: want at most 128 bytes of UTF-8, not %q (the server's own job)", c.Job, SelfJob))
	}
	if c.SyslogTLS != "" && (c.SyslogTLSCert == "" || c.SyslogTLSKey == "") {
		errs = append(errs, config.Field("syslog_tls", "needs syslog_tls_cert and syslog_tls_key (--syslog-tls-cert, --syslog-tls-key)"))
	}
	for i, rw := range c.remoteWrite() {
		if err := rw.Validate(); err != nil {
			errs = append(errs, &config.FieldError{Key: fmt.Sprintf("remote_write[%d]", i), Flag: "remote-write", Msg: err.Error()})
		}
	}
	for _, u := range list(c.Alertmanager) {
		if err := alerting.CheckURL(u); err != nil {
			errs = append(errs, config.Field("alertmanager", "%v", err))
		}
	}
	if err := c.Log.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.WireLimits.Validate())
	if err := c.AMQP.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("amqp: %w", err))
	}
	return errors.Join(errs...)
}

// FromFile returns the [server] settings of f.
func FromFile(f *config.File) *Config {
	c := DefaultConfig()
	if sc, ok := f.Sections["server"].(*Config); ok {
		c = *sc
	}
	if a, ok := f.Sections["amqp"].(*bus.Config); ok {
		c.AMQP = *a
	}
	return &c
}

// remoteWrite returns the remote-write destinations (none if unset).
func (c Config) remoteWrite() []remotewrite.Config {
	if c.RemoteWrite == nil {
		return nil
	}
	return *c.RemoteWrite
}

// remoteWriteFlag collects --remote-write URLs, repeated or comma-separated;
// the first replaces the file's remote_write.
type remoteWriteFlag struct {
	p   **[]remotewrite.Config
	set bool
}

func (f *remoteWriteFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	var urls []string
	for _, rw := range **f.p {
		urls = append(urls, rw.URL)
	}
	return strings.Join(urls, ",")
}

func (f *remoteWriteFlag) Set(s string) error {
	if !f.set {
		*f.p = &[]remotewrite.Config{}
		f.set = true
	}
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			**f.p = append(**f.p, remotewrite.Config{URL: u})
		}
	}
	return nil
}

// list returns the list p points to (none if nil).
func list(p *[]string) []string {
	if p == nil {
		return nil
	}
	return *p
}

// listFlag is config.List for a *[]string field: repeated or a comma
// list, the first use replacing the file's list.
type listFlag struct {
	p   **[]string
	set bool
}

func (f *listFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	return strings.Join(**f.p, ",")
}

func (f *listFlag) Set(s string) error {
	if !f.set {
		*f.p = &[]string{}
		f.set = true
	}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			**f.p = append(**f.p, v)
		}
	}
	return nil
}

// RegisterFlags binds the flags to c's fields, their values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.HTTP, "http", c.HTTP, "serve the HTTP API (Prometheus API v1, dashboard, /metrics) on this address")
	fs.StringVar(&c.WebConfig, "web-config", c.WebConfig, "Prometheus web configuration file: TLS, bcrypt basic auth, client certificates (default: plain HTTP, no auth)")
	fs.BoolVar(&c.EnableRemoteWriteReceiver, "enable-remote-write-receiver", c.EnableRemoteWriteReceiver, "store what is POSTed to /api/v1/write (Prometheus remote write 1.0)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "accept the aggregators' or samplers' stream on this address (default: off)")
	fs.StringVar(&c.KeyFile, "key", c.KeyFile, "shared key file of the stream (default: none, loopback peers only)")
	fs.StringVar(&c.KeyFile, "key-file", c.KeyFile, "same as --key")
	c.WireLimits.RegisterFlags(fs)
	fs.StringVar(&c.SyslogUDP, "syslog-udp", c.SyslogUDP, "receive syslog (RFC 3164/5424) over UDP on this address (default: off)")
	fs.StringVar(&c.SyslogTCP, "syslog-tcp", c.SyslogTCP, "receive syslog over TCP (newline or octet-counted) on this address (default: off)")
	fs.StringVar(&c.SyslogTLS, "syslog-tls", c.SyslogTLS, "receive syslog over TLS on this address (needs --syslog-tls-cert/-key)")
	fs.StringVar(&c.SyslogTLSCert, "syslog-tls-cert", c.SyslogTLSCert, "PEM certificate for --syslog-tls")
	fs.StringVar(&c.SyslogTLSKey, "syslog-tls-key", c.SyslogTLSKey, "PEM key for --syslog-tls")
	fs.StringVar(&c.SyslogRELP, "syslog-relp", c.SyslogRELP, "receive syslog over RELP (rsyslog omrelp; acknowledged once stored) on this address (default: off)")
	fs.StringVar(&c.Topology, "topology", c.Topology, "file of \"GROUP: host-list\" lines grouping nodes into racks for the dashboard; listed nodes that never connect are down")
	fs.Var(&c.LogsRetention, "logs-retention", "drop log messages older than this (default: keep)")
	fs.Var(&c.LogsMetricsInterval, "logs-metrics-interval", "write the log pattern counters (vigil_log_*) into the store this often (default 15s)")
	fs.IntVar(&c.LogsMaxPatternSeries, "logs-max-pattern-series", c.LogsMaxPatternSeries, "label sets of vigil_log_messages_total; the rest count as pattern=\"other\" (default 5000)")
	fs.StringVar(&c.Job, "job", c.Job, "job label of the nodes' series, beside instance=NODE (default \"node\", as node_exporter's usual scrape job)")
	fs.Var(&c.Interval, "interval", "the nodes' sampling interval; silent for 3 of them means down")
	fs.StringVar(&c.Data, "data", c.Data, "data directory (blocks and WAL)")
	fs.Var(&c.Retention, "retention", "drop data older than this (e.g. 15d)")
	fs.Var(&c.RollupRetention, "rollup-retention", "keep 1-minute rollups this long (default 400d)")
	fs.BoolVar(&c.DisableRollups, "disable-rollups", c.DisableRollups, "keep no 1-minute rollups; queries see raw data only")
	fs.Var(&c.MaxFuture, "max-future", "refuse samples more than this ahead of the server's clock; nodes whose clocks are off by more are flagged clock skew (default 10m)")
	fs.Int64Var(&c.RetentionBytes, "retention-bytes", c.RetentionBytes, "drop oldest blocks beyond this many bytes (0: no limit)")
	fs.Int64Var(&c.MinFreeBytes, "min-free-bytes", c.MinFreeBytes, "stop storing, read-only, while the data directory's file system has less free (0: 128 MiB; negative: no check)")
	fs.Var(&c.QueryTimeout, "query-timeout", "maximum time one query may take (default 2m)")
	fs.IntVar(&c.QueryMaxSamples, "query-max-samples", c.QueryMaxSamples, "maximum samples one query may load (default 50000000)")
	fs.IntVar(&c.QueryMaxConcurrent, "query-max-concurrency", c.QueryMaxConcurrent, "maximum heavy queries evaluated at once (default: the number of cores)")
	fs.BoolVar(&c.Slurm, "slurm", c.Slurm, "complete the job index from Slurm (squeue --json, scontrol show job)")
	fs.StringVar(&c.SlurmSqueue, "slurm-squeue", c.SlurmSqueue, "path of squeue for --slurm; scontrol is looked for beside it (default: from PATH)")
	fs.Var(&c.SlurmInterval, "slurm-interval", "how often --slurm asks squeue (default 30s; a job the nodes start asks sooner)")
	fs.BoolVar(&c.JobEvents, "job-events", c.JobEvents, "take job starts and ends from vigil job-event (POST /api/v1/jobs/{id}/event, as --http is protected)")
	fs.BoolVar(&c.DrainOnHealth, "drain-on-health", c.DrainOnHealth, "drain a node whose health checks fail in Slurm (scontrol update State=DRAIN Reason=\"vigil: ...\"), resume it when they all pass if Vigil drained it")
	fs.Var(&c.SlurmTimeout, "slurm-timeout", "give up on one Slurm command after this long (default 10s)")
	fs.Var(&c.EventsRetention, "events-retention", "keep the event stream (node up/down, jobs, alerts, health checks) this long (default 90d)")
	fs.Var(&c.IORetention, "io-retention", "keep the per-file I/O records (vigil io top) this long (default 30d)")
	fs.Int64Var(&c.IORetentionSize, "io-retention-size", c.IORetentionSize, "drop the oldest per-file I/O records beyond this many bytes on disk (default 8 GiB)")
	fs.BoolVar(&c.DebugPprof, "debug-pprof", c.DebugPprof, "serve Go's heap, CPU and goroutine profiles under /debug/pprof/ on --http")
	c.Log.RegisterFlags(fs)
	fs.Var(&listFlag{p: &c.Rules}, "rules", "Prometheus rule file or glob to evaluate (repeatable; reloaded on SIGHUP and POST /-/reload)")
	fs.Var(&listFlag{p: &c.Alertmanager}, "alertmanager", "send alerts to this Alertmanager URL, API v2 (repeatable, e.g. both of an HA pair)")
	fs.Var(&c.RuleInterval, "rule-interval", "evaluate rule groups that set no interval this often (default 15s)")
	fs.StringVar(&c.AMQP.URL, "amqp", c.AMQP.URL, "publish metrics, logs, events and jobs to this RabbitMQ broker, amqp://USER:PASS@HOST:PORT/VHOST (default: off; [amqp] table for the rest)")
	fs.Var(&remoteWriteFlag{p: &c.RemoteWrite}, "remote-write", "also send what the tree streams in (--listen) to this Prometheus remote-write URL (repeatable or comma list; replaces the file's remote_write)")
}

// jobsOptions are the job index's settings.
func (c Config) jobsOptions(reg prometheus.Registerer, log *slog.Logger) jobs.Options {
	o := jobs.Options{Dir: jobs.DefaultDir(c.Data), Interval: c.Interval.D(), Events: c.JobEvents, Registerer: reg, Logger: log.With("component", "jobs")}
	if c.Slurm {
		o.Slurm = &jobs.SlurmOptions{Squeue: c.SlurmSqueue, Every: c.SlurmInterval.D(), Timeout: c.SlurmTimeout.D()}
	}
	return o
}

// drainOptions are the health tap's settings: with DrainOnHealth, it
// drains and resumes through scontrol (beside SlurmSqueue, if set).
func (c Config) drainOptions(reg prometheus.Registerer, log *slog.Logger) drain.Options {
	o := drain.Options{Dir: c.Data, Registerer: reg, Logger: log.With("component", "health")}
	if c.DrainOnHealth {
		sc := "scontrol"
		if i := strings.LastIndexByte(c.SlurmSqueue, '/'); i >= 0 {
			sc = c.SlurmSqueue[:i+1] + "scontrol"
		}
		o.Scheduler = &drain.Slurm{Scontrol: sc, Timeout: c.SlurmTimeout.D()}
	}
	return o
}
