package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func init() {
	register(Command{Name: "simulate", Summary: "run N virtual samplers streaming to an aggregator (load tests)", Run: runSimulate})
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o simulate.Options
	fs.IntVar(&o.Nodes, "nodes", 100, "number of virtual nodes")
	fs.IntVar(&o.First, "first", 1, "number of the first node (names are cn00001, ...)")
	fs.DurationVar(&o.Interval, "interval", time.Second, "tick interval")
	upstream := fs.String("upstream", "", "aggregators to stream to, host:port[,host:port] in failover order")
	keyFile := fs.String("key", "", "shared key file for the handshake (none: the upstream must be on loopback)")
	fs.IntVar(&o.GroupSize, "group-size", 500, "nodes per goroutine and upstream connection (1: a connection per node)")
	fs.IntVar(&o.CPUs, "cpus", 16, "cores per virtual node (16 gives about 320 values per tick)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the simulated data")
	replay := fs.String("replay", "", "replay this recording (from `vigil record`) on every node instead of the synthetic model")
	fs.BoolVar(&o.Jobs, "jobs", true, "simulate a scheduler: jobs on the nodes, with their load and the jobs plugin's series (--jobs=false: none)")
	fs.Uint64Var(&o.JobSeed, "job-seed", 1, "seed of the simulated jobs")
	fs.BoolVar(&o.Health, "health", true, "nodes report the health plugin's series for four checks, about 1 node in 200 failing one for a few minutes now and then (--health=false: none)")
	fs.BoolVar(&o.Outages, "outages", true, "about 1 node in 500 goes silent for about 90 s every 10 minutes (--outages=false: none)")
	fs.BoolVar(&o.Fabric, "fabric", false, "some nodes also sweep a simulated InfiniBand fat tree over all the nodes (18 per leaf), emitting the ibnet series the Fabric view reads")
	fs.StringVar(&o.JobEvents, "job-events", "", "post the simulated jobs' starts and ends to this server (base URL, e.g. http://127.0.0.1:9090; the server needs --job-events)")
	var logOpts logging.Options
	logOpts.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	log, err := logging.New(stderr, logOpts)
	if err != nil {
		return err
	}
	o.Log = log
	for _, a := range splitList(*upstream) {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("--upstream %q: want host:port", a)
		}
		o.Upstream = append(o.Upstream, a)
	}
	if *keyFile != "" {
		if o.Key, err = wire.LoadKey(*keyFile); err != nil {
			return err
		}
	}
	if *replay != "" {
		if o.Replay, err = simulate.LoadRecording(*replay); err != nil {
			return fmt.Errorf("--replay: %w", err)
		}
		if iv := o.Replay.Interval(); iv != o.Interval {
			log.Warn("the recording's interval differs from --interval; replaying one recorded tick per interval", "recording", iv, "interval", o.Interval)
		}
	}
	return simulate.Run(ctx, o)
}
