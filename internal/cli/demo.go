package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/simulate"
	defaultrules "github.com/vigil-hpc/vigil/packaging/rules"
)

func init() {
	register(Command{Name: "demo", Summary: "run a whole Vigil in one process: server, dashboard, aggregator, this node and N simulated nodes", Run: runDemo})
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 512, "simulated nodes")
	data := fs.String("data", "", "data directory (default: a temporary one, removed on exit)")
	httpAddr := fs.String("http", "127.0.0.1:9090", "dashboard and API address")
	interval := fs.Duration("interval", time.Second, "sampling interval of every node")
	logOpts := logging.Options{Level: "warn"}
	logOpts.RegisterFlags(fs)
	debugPprof := fs.Bool("debug-pprof", false, "serve Go's profiles under /debug/pprof/ on the dashboard's address")
	replay := fs.String("replay", "", "simulated nodes replay this recording (`vigil record`) instead of the synthetic model")
	jobs := fs.Bool("jobs", true, "simulated nodes run jobs of a simulated scheduler (--jobs=false: none)")
	jobSeed := fs.Uint64("job-seed", 1, "seed of the simulated jobs")
	health := fs.Bool("health", true, "simulated nodes run health checks, a few failing now and then (--health=false: none)")
	outages := fs.Bool("outages", true, "a few simulated nodes go silent for about 90 s now and then (--outages=false: none)")
	fabric := fs.Bool("fabric", true, "simulated nodes sweep a simulated InfiniBand fat tree, for the Fabric view (--fabric=false: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *replay != "" {
		// Load it now, so a bad file fails the demo before anything starts.
		if _, err := simulate.LoadRecording(*replay); err != nil {
			return fmt.Errorf("--replay: %w", err)
		}
	}
	if *nodes < 0 || *nodes > 100_000 {
		return fmt.Errorf("--nodes %d: want 0..100000", *nodes)
	}
	if *interval < 10*time.Millisecond {
		return fmt.Errorf("--interval %s: want at least 10ms", *interval)
	}
	dir := *data
	if dir == "" {
		d, err := os.MkdirTemp("", "vigil-demo-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fmt.Errorf("--http %s: %w (is another Vigil running? try --http 127.0.0.1:0)", *httpAddr, err)
	}
	httpBound := hl.Addr().String()
	hl.Close()
	wireAddr, err := loopbackAddr()
	if err != nil {
		return err
	}
	aggAddr, err := loopbackAddr()
	if err != nil {
		return err
	}
	aggHTTP, err := loopbackAddr()
	if err != nil {
		return err
	}
	syslogAddr, err := loopbackAddr()
	if err != nil {
		return err
	}
	iv := interval.String()
	// The default rule file, as the packages install it, so the Status
	// view and /api/v1/alerts have rules to show.
	rulesPath := filepath.Join(dir, defaultrules.FileName)
	if err := os.WriteFile(rulesPath, defaultrules.Default, 0o644); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	srvArgs := []string{"--http", httpBound, "--listen", wireAddr, "--data", dir,
		"--syslog-tcp", syslogAddr, "--syslog-udp", syslogAddr, "--rules", rulesPath,
		"--interval", iv, "--log-level", logOpts.Level, "--log-format", logOpts.Format}
	if *debugPprof {
		srvArgs = append(srvArgs, "--debug-pprof")
	}
	// The simulated scheduler tells the server its jobs' metadata, as a
	// Slurm prolog and epilog would.
	jobEvents := *nodes > 0 && *jobs && *replay == ""
	if jobEvents {
		srvArgs = append(srvArgs, "--job-events")
	}
	g.Go(func() error { return runServer(gctx, srvArgs, stdout, stderr) })
	// Dial the HTTP ports, not the wire ones (a bare connect would be logged
	// as a failed handshake); each daemon binds its wire port first.
	if err := waitListening(gctx, httpBound); err != nil {
		return errors.Join(err, g.Wait())
	}
	g.Go(func() error {
		return runAggregator(gctx, []string{"--name", "demo-agg", "--listen", aggAddr, "--upstream", wireAddr,
			"--http", aggHTTP, "--interval", iv, "--log-level", logOpts.Level, "--log-format", logOpts.Format}, stdout, stderr)
	})
	if err := waitListening(gctx, aggHTTP); err != nil {
		return errors.Join(err, g.Wait())
	}
	g.Go(func() error {
		// This machine's real sampler; --gomaxprocs 0 leaves the demo
		// process's thread count alone.
		return runSamplerHere(gctx, []string{"--upstream", aggAddr, "--listen", "none", "--interval", iv,
			"--gomaxprocs", "0", "--log-level", logOpts.Level, "--log-format", logOpts.Format}, stdout, stderr)
	})
	if *nodes > 0 {
		simArgs := []string{"--nodes", strconv.Itoa(*nodes), "--upstream", aggAddr, "--interval", iv, "--log-level", logOpts.Level, "--log-format", logOpts.Format}
		if *replay != "" {
			simArgs = append(simArgs, "--replay", *replay)
		}
		simArgs = append(simArgs, "--jobs="+strconv.FormatBool(*jobs), "--job-seed", strconv.FormatUint(*jobSeed, 10),
			"--health="+strconv.FormatBool(*health), "--outages="+strconv.FormatBool(*outages), "--fabric="+strconv.FormatBool(*fabric))
		if jobEvents {
			simArgs = append(simArgs, "--job-events", "http://"+httpBound)
		}
		g.Go(func() error { return runSimulate(gctx, simArgs, stdout, stderr) })
	}
	g.Go(func() error {
		// Syslog traffic from the simulated nodes, for the logs views.
		return simulate.RunLogs(gctx, syslogAddr, max(*nodes, 1), 20, 1)
	})
	fmt.Fprintf(stdout, "Vigil demo: %d simulated nodes + this machine, data in %s\n", *nodes, dir)
	fmt.Fprintf(stdout, "  dashboard   http://%s/\n", httpBound)
	fmt.Fprintf(stdout, "  query API   http://%s/api/v1/query?query=up\n", httpBound)
	fmt.Fprintf(stdout, "  aggregator  %s (metrics at http://%s/metrics)\n", aggAddr, aggHTTP)
	fmt.Fprintf(stdout, "  rules       %s (alerts at http://%s/#/status)\n", rulesPath, httpBound)
	fmt.Fprintf(stdout, "  syslog      %s (TCP and UDP; try: logger --server 127.0.0.1 --port %s --tcp hello)\n", syslogAddr, portOf(syslogAddr))
	fmt.Fprintf(stdout, "  try:        bin/vigil logs patterns --server http://%s\n", httpBound)
	fmt.Fprintf(stdout, "  try:        bin/vigil query 'count(up == 1)' --server http://%s\n", httpBound)
	fmt.Fprintln(stdout, "Press Ctrl-C to stop.")
	err = g.Wait()
	if ctx.Err() != nil {
		fmt.Fprintln(stdout, "Vigil demo stopped.")
		return nil
	}
	return err
}

// loopbackAddr finds a free loopback port for a component of the demo.
func loopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("demo: nothing listening on %s after 30s", addr)
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
