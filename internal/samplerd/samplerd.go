// Package samplerd is the node daemon (`vigil sampler`) and the one-shot
// `vigil sample --once`. It is kept apart from the rest of the CLI so the
// lean bin/vigil-sampler binary links only what a compute node needs.
package samplerd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/buildinfo"
	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/httpsec/lean"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	_ "github.com/vigil-hpc/vigil/internal/sampler/plugins/all" // link every plugin
	"github.com/vigil-hpc/vigil/internal/wire"
)

// DefaultListen is where the sampler serves /metrics unless told otherwise.
const DefaultListen = ":9101"

// Options are the sampler's settings after config and flags are merged.
type Options struct {
	Config   *config.File
	Node     string
	Root     string
	Interval time.Duration
	Offset   time.Duration
	Plugins  []string
	Listen   string
	Upstream []string
	// UpstreamDelay: ticks at most this far apart go upstream two to a
	// write (wire.ClientOptions.Coalesce).
	UpstreamDelay time.Duration
	// IORecords takes the appio plugin's per-file records upstream (nil:
	// none are shipped); IORecordsDropped counts those its queue let go.
	IORecords        func(recs []appio.FileRecord)
	IORecordsDropped func() uint64
}

// Config is the sampler's settings: the [sampler] table, then the flags
// given on the command line (config.ParseFlags).
type Config struct {
	config.Sampler
	// File holds the plugins' tables.
	File *config.File
	// Flag-only settings.
	Key          string
	WebConfig    string
	GOMAXPROCS   int
	SampleConfig bool
	Log          logging.Options
	daemon       bool // the node daemon's flags, not `vigil sample`'s
	once         bool
}

// FromFile returns the settings of the node daemon in f.
func FromFile(f *config.File) *Config {
	return &Config{Sampler: f.Sampler, File: f, GOMAXPROCS: 1, daemon: true}
}

// RegisterFlags binds the flags to c's fields, their values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Root, "root", c.Root, "root of /proc and /sys (default \"/\"; a fixture tree in tests)")
	fs.Var(config.NewList(&c.Plugins), "plugins", "comma-separated plugins to run (default: the config's list, else the default set)")
	fs.StringVar(&c.Node, "node", c.Node, "value of the node label (default: host name)")
	c.Log.RegisterFlags(fs)
	if !c.daemon {
		fs.BoolVar(&c.once, "once", false, "collect once and print (the only mode)")
		return
	}
	fs.Var(&c.Interval, "interval", "sampling interval")
	fs.Var(&c.Offset, "offset", "offset of ticks from wall-clock multiples of the interval")
	fs.StringVar(&c.Listen, "listen", c.Listen, "serve /metrics on this address (default "+DefaultListen+"; \"none\" disables)")
	fs.Var(config.NewList(&c.Upstream), "upstream", "aggregators to stream to, host:port[,host:port] in failover order")
	fs.Var(&c.UpstreamDelay, "upstream-delay", "plugins sampling at least this often send ticks upstream two to a write, the first waiting one interval (0: every tick at once)")
	fs.StringVar(&c.Key, "key", c.Key, "shared key file for the upstream handshake (none: the upstream must be on loopback)")
	fs.StringVar(&c.WebConfig, "web-config", c.WebConfig, "Prometheus web configuration file for /metrics: TLS, bcrypt basic auth, client certificates")
	fs.BoolVar(&c.SampleConfig, "sample-config", false, "print a commented default configuration and exit")
	fs.IntVar(&c.GOMAXPROCS, "gomaxprocs", c.GOMAXPROCS, "OS threads running Go code; 1 keeps jitter on the node low")
}

// Validate checks the settings; the [sampler] rules are config.Sampler's.
func (c *Config) Validate() error { return errors.Join(c.Sampler.Validate(), c.Log.Validate()) }

// options resolves what is left unset: the listen address, the plugins
// and the node name.
func (c *Config) options() (*Options, error) {
	o := &Options{
		Config:        c.File,
		Node:          c.Node,
		Root:          c.Root,
		Interval:      c.Interval.D(),
		Offset:        c.Offset.D(),
		Plugins:       c.Plugins,
		Listen:        c.Listen,
		Upstream:      c.Upstream,
		UpstreamDelay: c.UpstreamDelay.D(),
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if len(o.Plugins) == 0 {
		o.Plugins = sampler.DefaultNames()
	}
	if o.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("host name for the node label: %w (set --node)", err)
		}
		o.Node, _, _ = strings.Cut(h, ".")
	}
	return o, nil
}

// Build initialises the selected plugins and returns a scheduler for them.
func Build(o *Options, log *slog.Logger, sink sampler.Sink) (*sampler.Scheduler, error) {
	stats := &sampler.Stats{}
	fs := kernfs.NewFS(o.Root)
	var insts []sampler.Instance
	for _, name := range o.Plugins {
		reg, _ := sampler.Lookup(name)
		cfg := o.Config.Plugins[name]
		p := reg.New(cfg)
		plog := log.With("plugin", name)
		if err := p.Init(sampler.Env{FS: fs, Logger: plog, Stats: stats, IORecords: o.IORecords, IORecordsDropped: o.IORecordsDropped}); err != nil {
			if errors.Is(err, sampler.ErrNotAvailable) {
				plog.Debug("plugin not available on this node", "err", err)
				continue
			}
			return nil, fmt.Errorf("plugin %s: %w", name, err)
		}
		iv, off := reg.Interval(cfg.CommonConfig(), o.Interval), o.Offset
		if c := cfg.CommonConfig(); c.Offset != 0 {
			off = c.Offset.D()
		}
		insts = append(insts, sampler.Instance{Name: name, Plugin: p, Interval: iv, Offset: off})
	}
	return sampler.NewScheduler(insts, stats, log, sink)
}

// OnceFromFile returns the settings of `vigil sample --once` in f.
func OnceFromFile(f *config.File) *Config { return &Config{Sampler: f.Sampler, File: f} }

// Once collects once and writes Prometheus text: `vigil sample --once`.
func Once(ctx context.Context, c *Config, log *slog.Logger, stdout io.Writer) error {
	o, err := c.options()
	if err != nil {
		return err
	}
	s, err := Build(o, log, nil)
	if err != nil {
		return err
	}
	defer s.Close() // plugins' files, goroutines and sockets (appio)
	var b metric.Batch
	s.CollectOnce(ctx, time.Now(), &b)
	tw := metric.TextWriter{ConstLabels: []metric.Label{{Name: "node", Value: o.Node}}}
	return tw.Write(stdout, &b)
}

// ConfigUsage is the help text of the sampler's --config.
const ConfigUsage = "configuration file (TOML); optional"

// Daemon is the node daemon, `vigil sampler`.
type Daemon struct {
	o         *Options
	log       *slog.Logger
	webConfig string
	up        *wire.Client
	s         *sampler.Scheduler
}

// New checks the settings that need files (web config, key), sets
// GOMAXPROCS and initialises the plugins; nothing is bound yet.
func New(c *Config, log *slog.Logger) (*Daemon, error) {
	if c.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(c.GOMAXPROCS)
	}
	o, err := c.options()
	if err != nil {
		return nil, err
	}
	if c.WebConfig != "" {
		if _, err := lean.LoadWebConfig(c.WebConfig); err != nil {
			return nil, err
		}
	}
	// The upstream stream: each tick is encoded on the scheduler's
	// goroutine and handed to the client's sender, never blocking the tick.
	var up *wire.Client
	var sink sampler.Sink
	if len(o.Upstream) > 0 {
		var key []byte
		if c.Key != "" {
			if key, err = wire.LoadKey(c.Key); err != nil {
				return nil, err
			}
		}
		up, err = wire.NewClient(wire.ClientOptions{Addrs: o.Upstream, Key: key, Name: o.Node, Log: log, Coalesce: o.UpstreamDelay})
		if err != nil {
			return nil, err
		}
		sink = up.Sink(o.Node) // one stream per scheduler group
		node := o.Node
		o.IORecords = func(recs []appio.FileRecord) { up.IORecords(node, recs) }
		o.IORecordsDropped = up.Stats().DroppedIORecords.Load
	}
	s, err := Build(o, log, sink)
	if err != nil {
		return nil, err
	}
	s.UseKernelTimer()
	return &Daemon{o: o, log: log, webConfig: c.WebConfig, up: up, s: s}, nil
}

// Run serves /metrics, streams upstream and samples until ctx ends, then
// closes the plugins.
func (d *Daemon) Run(ctx context.Context) error {
	o, log, up, s := d.o, d.log, d.up, d.s
	log.Info("sampler starting", "version", buildinfo.Version, "node", o.Node, "root", kernfs.NewFS(o.Root).Root,
		"interval", o.Interval, "plugins", strings.Join(o.Plugins, ","), "listen", o.Listen,
		"upstream", strings.Join(o.Upstream, ","))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var err error
	errc := make(chan error, 2)
	if o.Listen != "none" {
		ln, lerr := net.Listen("tcp", o.Listen)
		if lerr != nil {
			return errors.Join(fmt.Errorf("listen for /metrics: %w", lerr), s.Close())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A scrape needs a few connections; the cap keeps a flood of
			// clients from costing the node memory.
			if err := lean.Serve(ctx, ln, Handler(s, o.Node, up), lean.Options{
				WebConfigFile: d.webConfig, MaxConnections: 32, Logger: log.With("component", "http"),
			}); err != nil {
				errc <- err
			}
		}()
	}
	if up != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = up.Run(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- s.Run(ctx)
	}()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	wg.Wait()
	if cerr := s.Close(); cerr != nil {
		log.Warn("closing plugins", "err", cerr)
	}
	log.Info("sampler stopped")
	return err
}

// Handler serves the latest collection at /metrics, and the upstream
// client's counters when up is not nil.
func Handler(s *sampler.Scheduler, node string, up *wire.Client) http.Handler {
	var mu sync.Mutex
	tw := &metric.TextWriter{ConstLabels: []metric.Label{{Name: "node", Value: node}}}
	var um *upstreamMetrics
	if up != nil {
		um = newUpstreamMetrics(up)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		mu.Lock()
		defer mu.Unlock()
		s.View(func(bs []*metric.Batch) {
			if um != nil {
				bs = append(bs, um.batch())
			}
			_ = tw.Write(w, bs...)
		})
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html><body><h1>vigil sampler</h1><p>node %s</p><a href=\"/metrics\">/metrics</a></body></html>\n", node)
	})
	return mux
}

// SampleConfig is the commented default configuration.
func SampleConfig() string {
	var sb strings.Builder
	sb.WriteString(`# vigil.toml: configuration of the Vigil node sampler.
# Every key is optional; command-line flags override what is set here.

[sampler]
# Value of the "node" label on every series; empty = the host name.
node = ""
# Root of /proc and /sys (a fixture tree in tests).
root = "/"
# Default sampling interval; ticks fall on wall-clock multiples of it, so
# every node samples at the same instant.
interval = "1s"
# Offset added to every aligned tick (e.g. to stagger plugins).
offset = "0s"
# Where /metrics is served (a drop-in for node_exporter); "none" disables.
listen = "` + DefaultListen + `"
# Plugins to run; empty = the default set: ` + strings.Join(sampler.DefaultNames(), ", ") + `.
plugins = []
# Aggregators to stream to, in failover order.
upstream = []
# Plugins sampling at least this often (at most 1s) send their ticks
# upstream two to a write, the first waiting one interval for the second: at
# 10 Hz a write every 200 ms, at 1 Hz a write every tick. "0s": every tick is
# written at once.
upstream_delay = "250ms"
`)
	for _, n := range sampler.Names() {
		reg, _ := sampler.Lookup(n)
		sb.WriteString("\n")
		sb.WriteString(reg.SampleConfig)
	}
	return sb.String()
}
