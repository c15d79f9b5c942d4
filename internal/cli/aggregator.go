package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/internal/aggregator"
	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/httpsec"
	"github.com/vigil-hpc/vigil/internal/samplerd"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func init() {
	register(Command{Name: "aggregator", Summary: "run a tree aggregator (fan-in, buffering, failover)", Run: runAggregator})
}

// Default aggregator ports: the wire listener and its /metrics.
const (
	DefaultAggregatorListen = ":7070"
	DefaultAggregatorHTTP   = ":7071"
)

func runAggregator(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("aggregator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfgPath   = fs.String("config", "", "configuration file (TOML, [aggregator] table); optional")
		listen    = fs.String("listen", "", "wire listener for children (default "+DefaultAggregatorListen+")")
		upstream  = fs.String("upstream", "", "upstream aggregators or server, host:port[,host:port] in failover order")
		httpAddr  = fs.String("http", "", "serve /metrics and /api/tree here (default "+DefaultAggregatorHTTP+"; \"none\" disables)")
		keyFile   = fs.String("key", "", "shared key file: authenticate children and upstream")
		webConfig = fs.String("web-config", "", "Prometheus web configuration file for --http: TLS, bcrypt basic auth, client certificates")
		name      = fs.String("name", "", "this aggregator's name (default: host name)")
		interval  = fs.Duration("interval", 0, "children's sampling interval; silent for 3 intervals = down (default 1s)")
		children  = fs.String("children", "", "expected children, comma-separated names or host:port")
		childFile = fs.String("children-file", "", "host-list file of expected children (re-read on change or SIGHUP)")
		bufBytes  = fs.Int("buffer-bytes", 0, "bytes buffered while the upstream is away (default 512 MiB)")
		logLevel  = fs.String("log-level", "info", "debug, info, warn or error")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := samplerd.NewLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	file := config.Defaults()
	if *cfgPath != "" {
		if file, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	ac := file.Aggregator
	cfg := aggregator.Config{
		Name: ac.Name, Listen: ac.Listen, Upstream: ac.Upstream, HTTP: ac.HTTP, Interval: ac.Interval.D(),
		Children: ac.Children, ChildrenFile: ac.ChildrenFile, BufferBytes: ac.BufferBytes, Log: log,
	}
	key := ac.Key
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["listen"] {
		cfg.Listen = *listen
	}
	if set["upstream"] {
		cfg.Upstream = splitList(*upstream)
	}
	if set["http"] {
		cfg.HTTP = *httpAddr
	}
	if set["key"] {
		key = *keyFile
	}
	if set["name"] {
		cfg.Name = *name
	}
	if set["interval"] {
		cfg.Interval = *interval
	}
	if set["children"] {
		cfg.Children = splitList(*children)
	}
	if set["children-file"] {
		cfg.ChildrenFile = *childFile
	}
	if set["buffer-bytes"] {
		cfg.BufferBytes = *bufBytes
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultAggregatorListen
	}
	switch cfg.HTTP {
	case "":
		cfg.HTTP = DefaultAggregatorHTTP
	case "none":
		cfg.HTTP = ""
	}
	if cfg.Interval < 0 || (set["interval"] && cfg.Interval < time.Millisecond) {
		return fmt.Errorf("--interval must be at least 1ms")
	}
	cfg.WebConfig = *webConfig
	if err := httpsec.Validate(cfg.WebConfig); err != nil {
		return err
	}
	if key != "" {
		if cfg.Key, err = wire.LoadKey(key); err != nil {
			return err
		}
	}
	agg, err := aggregator.New(cfg)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				agg.Reload()
			}
		}
	}()
	return agg.Run(ctx)
}
