package server

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"

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

	Retention        Duration `toml:"retention"`
	RetentionBytes   int64    `toml:"retention_bytes"`
	OutOfOrderWindow Duration `toml:"out_of_order_window"`
	// MaxFuture refuses samples further ahead of the server's clock; a
	// node whose clock is off by more is flagged as clock skew
	// (0: store.DefaultMaxFuture, 10m).
	MaxFuture Duration `toml:"max_future"`
	// RollupRetention keeps one-minute min/max/mean/count rollups this
	// long beside the raw data (Retention); 0 means 400d. Both zero
	// values mean rollups on, so old configs get them.
	RollupRetention Duration `toml:"rollup_retention"`
	DisableRollups  bool     `toml:"disable_rollups"`

	QueryTimeout       Duration `toml:"query_timeout"`
	QueryMaxSamples    int      `toml:"query_max_samples"`
	QueryMaxConcurrent int      `toml:"query_max_concurrent"`

	// Syslog intake (off unless an address is set); messages are kept
	// under Data/logs.
	// Topology groups nodes into racks or partitions for the dashboard
	// (a file of "GROUP: host-list" lines).
	Topology string `toml:"topology"`

	SyslogUDP     string   `toml:"syslog_udp"`
	SyslogTCP     string   `toml:"syslog_tcp"`
	SyslogTLS     string   `toml:"syslog_tls"`
	SyslogTLSCert string   `toml:"syslog_tls_cert"`
	SyslogTLSKey  string   `toml:"syslog_tls_key"`
	LogsRetention Duration `toml:"logs_retention"`
	LogsMaxBytes  int64    `toml:"logs_max_bytes"`

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

	// DebugPprof serves Go's profiles under /debug/pprof/ on HTTP (behind
	// its web config), for finding where memory and CPU go.
	DebugPprof bool `toml:"debug_pprof"`
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
	}
}

// Duration accepts Prometheus durations ("15d", "2h30m") in TOML.
type Duration time.Duration

// UnmarshalText parses a Prometheus duration ("15d") or a Go one ("1.5s",
// what time.Duration.String writes).
func (d *Duration) UnmarshalText(b []byte) error {
	if v, err := model.ParseDuration(string(b)); err == nil {
		*d = Duration(v)
		return nil
	}
	if v, err := time.ParseDuration(string(b)); err == nil && v >= 0 {
		*d = Duration(v)
		return nil
	}
	return fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"2h\" or \"15d\")", b)
}

// MarshalText writes the duration as Prometheus does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(model.Duration(d).String()), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String and Set make Duration a flag.Value.
func (d *Duration) String() string { return model.Duration(*d).String() }

// Set parses a flag value.
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

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
		errs = append(errs, errors.New("http: empty address"))
	}
	if c.Data == "" {
		errs = append(errs, errors.New("data: empty directory"))
	}
	for _, v := range []struct {
		key string
		n   int64
	}{
		{"interval", int64(c.Interval)}, {"retention", int64(c.Retention)}, {"retention_bytes", c.RetentionBytes},
		{"out_of_order_window", int64(c.OutOfOrderWindow)}, {"max_future", int64(c.MaxFuture)}, {"rollup_retention", int64(c.RollupRetention)}, {"query_timeout", int64(c.QueryTimeout)},
		{"query_max_samples", int64(c.QueryMaxSamples)}, {"query_max_concurrent", int64(c.QueryMaxConcurrent)},
	} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative", v.key))
		}
	}
	if c.SyslogTLS != "" && (c.SyslogTLSCert == "" || c.SyslogTLSKey == "") {
		errs = append(errs, errors.New("syslog_tls needs syslog_tls_cert and syslog_tls_key"))
	}
	if c.LogsRetention < 0 || c.LogsMaxBytes < 0 {
		errs = append(errs, errors.New("logs_retention and logs_max_bytes must not be negative"))
	}
	for i, rw := range c.remoteWrite() {
		if err := rw.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("remote_write[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

type flags struct {
	configFile, logLevel string
	cfg                  Config
	remoteWrite          remoteWriteFlag
}

// remoteWrite returns the remote-write destinations (none if unset).
func (c Config) remoteWrite() []remotewrite.Config {
	if c.RemoteWrite == nil {
		return nil
	}
	return *c.RemoteWrite
}

// remoteWriteFlag collects --remote-write URLs, repeated or comma-separated.
type remoteWriteFlag []string

func (f *remoteWriteFlag) String() string { return strings.Join(*f, ",") }

func (f *remoteWriteFlag) Set(s string) error {
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			*f = append(*f, u)
		}
	}
	return nil
}

func (f *flags) register(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&f.configFile, "config", "", "configuration file (TOML, [server] table); optional")
	fs.StringVar(&f.cfg.HTTP, "http", d.HTTP, "serve the HTTP API (Prometheus API v1, dashboard, /metrics) on this address")
	fs.StringVar(&f.cfg.WebConfig, "web-config", "", "Prometheus web configuration file: TLS, bcrypt basic auth, client certificates (default: plain HTTP, no auth)")
	fs.BoolVar(&f.cfg.EnableRemoteWriteReceiver, "enable-remote-write-receiver", false, "store what is POSTed to /api/v1/write (Prometheus remote write 1.0)")
	fs.StringVar(&f.cfg.Listen, "listen", "", "accept the aggregators' or samplers' stream on this address (default: off)")
	fs.StringVar(&f.cfg.KeyFile, "key", "", "shared key file of the stream (default: none, loopback peers only)")
	fs.StringVar(&f.cfg.KeyFile, "key-file", "", "same as --key")
	fs.StringVar(&f.cfg.SyslogUDP, "syslog-udp", "", "receive syslog (RFC 3164/5424) over UDP on this address (default: off)")
	fs.StringVar(&f.cfg.SyslogTCP, "syslog-tcp", "", "receive syslog over TCP (newline or octet-counted) on this address (default: off)")
	fs.StringVar(&f.cfg.SyslogTLS, "syslog-tls", "", "receive syslog over TLS on this address (needs --syslog-tls-cert/-key)")
	fs.StringVar(&f.cfg.SyslogTLSCert, "syslog-tls-cert", "", "PEM certificate for --syslog-tls")
	fs.StringVar(&f.cfg.SyslogTLSKey, "syslog-tls-key", "", "PEM key for --syslog-tls")
	fs.StringVar(&f.cfg.SyslogRELP, "syslog-relp", "", "receive syslog over RELP (rsyslog omrelp; acknowledged once stored) on this address (default: off)")
	fs.StringVar(&f.cfg.Topology, "topology", "", "file of \"GROUP: host-list\" lines grouping nodes into racks for the dashboard")
	fs.Var(&f.cfg.LogsRetention, "logs-retention", "drop log messages older than this (default: keep)")
	f.cfg.Interval = d.Interval
	fs.Var(&f.cfg.Interval, "interval", "the nodes' sampling interval; silent for 3 of them means down")
	fs.StringVar(&f.cfg.Data, "data", d.Data, "data directory (blocks and WAL)")
	f.cfg.Retention = d.Retention
	fs.Var(&f.cfg.Retention, "retention", "drop data older than this (e.g. 15d)")
	fs.Var(&f.cfg.RollupRetention, "rollup-retention", "keep 1-minute rollups this long (default 400d)")
	fs.BoolVar(&f.cfg.DisableRollups, "disable-rollups", false, "keep no 1-minute rollups; queries see raw data only")
	fs.Var(&f.cfg.MaxFuture, "max-future", "refuse samples more than this ahead of the server's clock; nodes whose clocks are off by more are flagged clock skew (default 10m)")
	fs.Int64Var(&f.cfg.RetentionBytes, "retention-bytes", 0, "drop oldest blocks beyond this many bytes (0: no limit)")
	fs.Var(&f.cfg.QueryTimeout, "query-timeout", "maximum time one query may take (default 2m)")
	fs.IntVar(&f.cfg.QueryMaxSamples, "query-max-samples", 0, "maximum samples one query may load (default 50000000)")
	fs.IntVar(&f.cfg.QueryMaxConcurrent, "query-max-concurrency", 0, "maximum queries evaluated at once (default 20)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&f.cfg.DebugPprof, "debug-pprof", false, "serve Go's heap, CPU and goroutine profiles under /debug/pprof/ on --http")
	fs.Var(&f.remoteWrite, "remote-write", "also send what the tree streams in (--listen) to this Prometheus remote-write URL (repeatable or comma list; replaces the file's remote_write)")
}

// config merges defaults, the file and the flags given on the command line,
// in that order.
func (f *flags) config(fs *flag.FlagSet) (Config, error) {
	cfg := DefaultConfig()
	if f.configFile != "" {
		c, err := LoadConfig(f.configFile)
		if err != nil {
			return cfg, err
		}
		cfg = c
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "http":
			cfg.HTTP = f.cfg.HTTP
		case "web-config":
			cfg.WebConfig = f.cfg.WebConfig
		case "enable-remote-write-receiver":
			cfg.EnableRemoteWriteReceiver = f.cfg.EnableRemoteWriteReceiver
		case "listen":
			cfg.Listen = f.cfg.Listen
		case "data":
			cfg.Data = f.cfg.Data
		case "key", "key-file":
			cfg.KeyFile = f.cfg.KeyFile
		case "syslog-udp":
			cfg.SyslogUDP = f.cfg.SyslogUDP
		case "syslog-tcp":
			cfg.SyslogTCP = f.cfg.SyslogTCP
		case "syslog-tls":
			cfg.SyslogTLS = f.cfg.SyslogTLS
		case "syslog-tls-cert":
			cfg.SyslogTLSCert = f.cfg.SyslogTLSCert
		case "syslog-tls-key":
			cfg.SyslogTLSKey = f.cfg.SyslogTLSKey
		case "syslog-relp":
			cfg.SyslogRELP = f.cfg.SyslogRELP
		case "topology":
			cfg.Topology = f.cfg.Topology
		case "logs-retention":
			cfg.LogsRetention = f.cfg.LogsRetention
		case "interval":
			cfg.Interval = f.cfg.Interval
		case "retention":
			cfg.Retention = f.cfg.Retention
		case "rollup-retention":
			cfg.RollupRetention = f.cfg.RollupRetention
		case "disable-rollups":
			cfg.DisableRollups = f.cfg.DisableRollups
		case "max-future":
			cfg.MaxFuture = f.cfg.MaxFuture
		case "retention-bytes":
			cfg.RetentionBytes = f.cfg.RetentionBytes
		case "query-timeout":
			cfg.QueryTimeout = f.cfg.QueryTimeout
		case "query-max-samples":
			cfg.QueryMaxSamples = f.cfg.QueryMaxSamples
		case "query-max-concurrency":
			cfg.QueryMaxConcurrent = f.cfg.QueryMaxConcurrent
		case "debug-pprof":
			cfg.DebugPprof = f.cfg.DebugPprof
		case "remote-write":
			var rws []remotewrite.Config
			for _, u := range f.remoteWrite {
				rws = append(rws, remotewrite.Config{URL: u})
			}
			cfg.RemoteWrite = &rws
		}
	})
	if err := cfg.validate(); err != nil {
		return cfg, fmt.Errorf("server settings: %w", err)
	}
	return cfg, nil
}
