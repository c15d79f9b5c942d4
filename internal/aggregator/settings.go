package aggregator

import (
	"errors"
	"flag"
	"log/slog"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/httpsec"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Default addresses: the wire listener and its /metrics.
const (
	DefaultListen = ":7070"
	DefaultHTTP   = ":7071"
)

// Settings are `vigil aggregator`'s settings: the [aggregator] table,
// then the flags given on the command line (config.ParseFlags).
type Settings struct {
	config.Aggregator
	WebConfig string // flag only
	Log       logging.Options
}

// SettingsFromFile returns the [aggregator] settings of f.
func SettingsFromFile(f *config.File) *Settings { return &Settings{Aggregator: f.Aggregator} }

// RegisterFlags binds the flags to s's fields, their values as defaults.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.Listen, "listen", s.Listen, "wire listener for children (default "+DefaultListen+")")
	fs.Var(config.NewList(&s.Upstream), "upstream", "upstream aggregators or server, host:port[,host:port] in failover order")
	fs.StringVar(&s.HTTP, "http", s.HTTP, "serve /metrics and /api/tree here (default "+DefaultHTTP+"; \"none\" disables)")
	fs.StringVar(&s.Key, "key", s.Key, "shared key file: authenticate children and upstream")
	fs.StringVar(&s.WebConfig, "web-config", s.WebConfig, "Prometheus web configuration file for --http: TLS, bcrypt basic auth, client certificates")
	fs.StringVar(&s.Name, "name", s.Name, "this aggregator's name (default: host name)")
	fs.Var(&s.Interval, "interval", "children's sampling interval; silent for 3 intervals = down")
	fs.Var(config.NewList(&s.Children), "children", "expected children, comma-separated names or host:port")
	fs.StringVar(&s.ChildrenFile, "children-file", s.ChildrenFile, "host-list file of expected children (re-read on change or SIGHUP)")
	fs.IntVar(&s.BufferBytes, "buffer-bytes", s.BufferBytes, "bytes buffered while the upstream is away (default 512 MiB)")
	fs.BoolVar(&s.CheckValues, "check-values", s.CheckValues, "check every relayed value code before passing it on, and close a child's connection on a bad one (default: pass value codes on unchecked; the server drops a bad frame and asks for a keyframe)")
	fs.BoolVar(&s.DebugPprof, "debug-pprof", s.DebugPprof, "serve Go's heap, CPU and goroutine profiles under /debug/pprof/ on --http")
	s.WireLimits.RegisterFlags(fs)
	s.Log.RegisterFlags(fs)
}

// Validate checks the settings; the [aggregator] rules are
// config.Aggregator's.
func (s *Settings) Validate() error {
	return errors.Join(s.Aggregator.Validate(), s.Log.Validate())
}

// Config resolves the defaults, checks the web configuration and reads
// the key file, giving New's Config.
func (s *Settings) Config(log *slog.Logger) (Config, error) {
	cfg := Config{
		Name: s.Name, Listen: s.Listen, Upstream: s.Upstream, HTTP: s.HTTP, Interval: s.Interval.D(),
		Children: s.Children, ChildrenFile: s.ChildrenFile, BufferBytes: s.BufferBytes, Log: log,
		WebConfig: s.WebConfig, WireLimits: s.WireLimits, DebugPprof: s.DebugPprof, CheckValues: s.CheckValues,
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	switch cfg.HTTP {
	case "":
		cfg.HTTP = DefaultHTTP
	case "none":
		cfg.HTTP = ""
	}
	if err := httpsec.Validate(cfg.WebConfig); err != nil {
		return cfg, err
	}
	if s.Key != "" {
		var err error
		if cfg.Key, err = wire.LoadKey(s.Key); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}
