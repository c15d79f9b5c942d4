package simulate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Options configure Run.
type Options struct {
	Nodes    int
	First    int           // number of the first node (cn00001 = 1)
	Interval time.Duration // tick interval
	Upstream []string      // failover list, as for the sampler
	Key      []byte
	// GroupSize is the number of nodes sharing one goroutine and one
	// upstream connection (1 = a connection per node, like real samplers).
	GroupSize int
	CPUs      int // cores per node
	Seed      uint64
	Log       *slog.Logger
	// ReportEvery is how often totals are logged (0: 10s).
	ReportEvery time.Duration
	// Replay, if set, makes every node replay this recording (each from
	// its own offset) instead of the synthetic model; CPUs is then unused.
	Replay *Recording
	// Jobs runs a simulated scheduler (seeded by JobSeed) whose jobs load
	// the nodes and show as the jobs plugin's series; Scheduler, if set,
	// is used instead of a new one (a caller that lists its jobs). Neither
	// applies to Replay.
	Jobs      bool
	JobSeed   uint64
	Scheduler *Scheduler
	// JobEvents, if set, is the base URL of a server run with --job-events:
	// the scheduler's job starts and ends are posted there (needs Jobs or
	// Scheduler).
	JobEvents string
	// Health makes every node of the model report the health plugin's
	// series for four checks, a few nodes failing one now and then;
	// Outages makes a few nodes (of the model or a replay) go silent for
	// about 90 s now and then (FaultOptions has the schedule, seeded by
	// Seed; FaultScale scales its durations, 0: 1).
	Health, Outages bool
	FaultScale      float64
	// Fabric makes some nodes sweep a simulated InfiniBand fat tree over
	// all the nodes, emitting the ibnet plugin's series (fabric.go).
	Fabric bool
}

// source is one virtual node's data: the model (Node) or a recording
// (ReplayNode).
type source interface {
	Sample(t time.Time, dt time.Duration, b *metric.Batch)
}

// Run streams Nodes virtual samplers upstream until ctx is done.
func Run(ctx context.Context, o Options) error {
	switch {
	case o.Nodes <= 0:
		return fmt.Errorf("nodes %d: must be positive", o.Nodes)
	case o.Interval < time.Millisecond:
		return fmt.Errorf("interval %s: must be at least 1ms", o.Interval)
	case len(o.Upstream) == 0:
		return errors.New("no upstream address (--upstream)")
	case o.Replay == nil && (o.CPUs <= 0 || o.CPUs > 4096):
		return fmt.Errorf("cpus %d: want 1..4096", o.CPUs)
	}
	if o.GroupSize <= 0 {
		o.GroupSize = 500
	}
	if o.First <= 0 {
		o.First = 1
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.ReportEvery <= 0 {
		o.ReportEvery = 10 * time.Second
	}
	log := o.Log.With("component", "simulate")
	sch := NewSchema(o.CPUs)
	sched := o.Scheduler
	if sched == nil && o.Jobs && o.Replay == nil {
		var err error
		sched, err = NewScheduler(SchedulerOptions{Nodes: o.Nodes, First: o.First, CPUs: o.CPUs, Interval: o.Interval, Seed: o.JobSeed})
		if err != nil {
			return err
		}
	}
	if sched != nil && o.Replay == nil && (sched.o.Nodes != o.Nodes || sched.o.First != o.First) {
		return fmt.Errorf("scheduler for %d nodes from %s, simulating %d from %s", sched.o.Nodes, NodeName(sched.o.First), o.Nodes, NodeName(o.First))
	}
	var events *EventSender
	if o.JobEvents != "" {
		if sched == nil || o.Replay != nil {
			return errors.New("job events need the simulated scheduler (--jobs, no --replay)")
		}
		var err error
		if events, err = NewEventSender(EventOptions{Server: o.JobEvents, Log: o.Log}); err != nil {
			return err
		}
		sched.OnEvent(func(ev JobEvent) { events.Send(ev) })
	}
	var faults *Faults
	if (o.Health && o.Replay == nil) || o.Outages {
		var err error
		faults, err = NewFaults(FaultOptions{Nodes: o.Nodes, Interval: o.Interval, Seed: o.Seed,
			Start: sampler.NextTick(time.Now(), o.Interval, 0), Health: o.Health && o.Replay == nil, Outages: o.Outages, Scale: o.FaultScale})
		if err != nil {
			return err
		}
	}
	var fab *Fabric
	if o.Fabric {
		var err error
		if fab, err = NewFabric(FabricOptions{Nodes: o.Nodes, First: o.First, Seed: o.Seed, Scheduler: sched}); err != nil {
			return err
		}
	}
	var clients []*wire.Client
	var overruns atomic.Uint64
	// Where the latency of a tick goes before it leaves: how late it was
	// produced (this process short of CPU) and written to the socket.
	var produced, written, build lagHist
	g, ctx := errgroup.WithContext(ctx)
	for start := 0; start < o.Nodes; start += o.GroupSize {
		end := min(start+o.GroupSize, o.Nodes)
		grp := &group{interval: o.Interval, lead: o.Interval / 2, overruns: &overruns, produced: &produced, build: &build,
			faults: faults, first: start}
		c, err := wire.NewClient(wire.ClientOptions{
			Addrs: o.Upstream,
			Key:   o.Key,
			Name:  "simulate/" + NodeName(o.First+start),
			Log:   o.Log.With("group", NodeName(o.First+start)),
			// About a minute of ticks at 1s.
			MaxQueueBytes: min((end-start)*32<<10, 256<<20),
			Written:       func(t, _, now time.Time) { written.observe(now.Sub(t)) },
			Hold:          true, // ticks are encoded ahead (group.run)
		})
		if err != nil {
			return err
		}
		grp.client = c
		grp.since = make([]time.Time, end-start)
		for i := start; i < end; i++ {
			name := NodeName(o.First + i)
			if o.Replay != nil {
				// Offsets spread the nodes over the recording, so they
				// are not in lockstep.
				grp.nodes = append(grp.nodes, NewReplayNode(name, o.Replay, i*o.Replay.Ticks()/o.Nodes))
			} else {
				n := NewNode(name, sch, o.Seed*1_000_003+uint64(o.First+i))
				if sched != nil {
					n.SetScheduler(sched, i)
				}
				n.SetFaults(faults, i)
				grp.nodes = append(grp.nodes, n)
			}
			if sw := fab.sweeper(i); sw != nil {
				grp.nodes[len(grp.nodes)-1] = fabricSource{grp.nodes[len(grp.nodes)-1], sw}
			}
			grp.names = append(grp.names, name)
			grp.streams = append(grp.streams, c.NewStream(name))
		}
		clients = append(clients, c)
		g.Go(func() error { return c.Run(ctx) })
		g.Go(func() error { grp.run(ctx); return nil })
	}
	if events != nil {
		g.Go(func() error { return events.Run(ctx) })
	}
	perNode, data := sch.Len(), "model"
	if sched != nil {
		data = fmt.Sprintf("model with jobs (at most %d running)", sched.o.MaxJobs)
	}
	if o.Replay != nil {
		perNode, data = o.Replay.Series(), fmt.Sprintf("replay of %d ticks (series: all it recorded)", o.Replay.Ticks())
	}
	var flaky, outages int
	if faults != nil {
		flaky, outages = faults.Flaky(), faults.Outages()
		if faults.o.Health {
			perNode += HealthSeries
		}
	}
	log.Info("simulating", "nodes", o.Nodes, "first", NodeName(o.First), "data", data, "series_per_node", perNode,
		"interval", o.Interval, "connections", len(clients), "upstream", o.Upstream, "key", o.Key != nil,
		"health", o.Health && o.Replay == nil, "flaky_nodes", flaky, "outages", o.Outages, "silent_per_10m", outages,
		"fabric_switches", fab.switches())
	g.Go(func() error {
		t := time.NewTicker(o.ReportEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			var ticks, dropped, bytes uint64
			connected := 0
			for _, c := range clients {
				st := c.Stats()
				ticks += st.Ticks.Load()
				dropped += st.Dropped.Load()
				bytes += st.Bytes.Load()
				if st.Connected.Load() {
					connected++
				}
			}
			p50, p99 := produced.take()
			w50, w99 := written.take()
			b50, b99 := build.take()
			args := []any{"ticks", ticks, "dropped", dropped, "bytes", bytes,
				"connected", connected, "connections", len(clients), "overruns", overruns.Load(),
				"produced_p50", p50, "produced_p99", p99, "written_p50", w50, "written_p99", w99,
				"build_p50", b50, "build_p99", b99, "lead", o.Interval / 2}
			if events != nil {
				args = append(args, "job_events_sent", events.Sent(), "job_events_dropped", events.Dropped(), "job_events_failed", events.Failed())
			}
			log.Info("totals", args...)
		}
	})
	return g.Wait()
}

// group is the nodes one goroutine samples, sharing one connection.
type group struct {
	interval time.Duration
	// lead is how long before a tick's time the group builds and encodes
	// it; its client holds the frames until then (ClientOptions.Hold).
	lead     time.Duration
	client   *wire.Client
	nodes    []source
	names    []string
	streams  []*wire.ClientStream
	overruns *atomic.Uint64
	// produced: how late each node's tick was ready to be written (built,
	// encoded and due) after its timestamp; build: how long the group
	// took to build and encode a tick of all its nodes.
	produced, build *lagHist
	// With faults: nodes in an outage are skipped (first is the group's
	// first node's index in the cluster); since[i] is the last tick node i
	// sent before it went silent, zero while it ticks.
	faults *Faults
	first  int
	since  []time.Time
}

// maxCatchUp bounds the ticks a group produces late after running long;
// a longer stall (a suspended process) is skipped and reported as a gap.
const maxCatchUp = 5

// run prepares each tick ahead and has it written on time. On a real
// cluster every node builds its own tick on its own cores, in parallel,
// so its frame is ready at the tick's time; one process building and
// encoding thousands of nodes' ticks after the second starts put its own
// cost (150-300 ms at 10,000-20,000 nodes on 2 cores) into every latency
// measured downstream. A model can sample any instant, so the tick for t
// is built and encoded at t - lead, with the values and timestamp it
// would have at t, and the client writes it at t (Release). A tick whose
// preparation runs past its time goes out when ready, late, as before.
func (g *group) run(ctx context.Context) {
	var b metric.Batch
	next := sampler.NextTick(time.Now(), g.interval, 0)
	last := next.Add(-g.interval)
	timer := time.NewTimer(time.Until(next.Add(-g.lead)))
	defer timer.Stop()
	wait := func(d time.Duration) bool {
		if d <= 0 {
			return ctx.Err() == nil
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		dt := next.Sub(last)
		start := time.Now()
		ahead := uint64(0) // ticks ready before their time
		for i, n := range g.nodes {
			ndt := dt
			if g.faults != nil {
				if g.faults.Silent(g.first+i, next) {
					// Silent: no tick, as from a node that hangs or lost
					// its network; the others go on.
					if g.since[i].IsZero() {
						g.since[i] = last
					}
					continue
				}
				if !g.since[i].IsZero() {
					ndt, g.since[i] = next.Sub(g.since[i]), time.Time{}
				}
			}
			b.Reset(next)
			n.Sample(next, ndt, &b)
			g.client.Tick(g.streams[i], b.Time, b.Descs, b.Values)
			if late := time.Since(next); late >= 0 {
				g.produced.observe(late)
			} else {
				ahead++
			}
		}
		built := time.Since(start)
		g.build.observe(built)
		if !wait(time.Until(next)) {
			return
		}
		g.client.Release(next)
		g.produced.observeN(time.Since(next), ahead)
		last = next
		now := time.Now()
		after := sampler.NextTick(now, g.interval, 0)
		missed := int64(after.Sub(next)/g.interval) - 1
		// A model can sample any instant, so ticks missed because the
		// first tick (every schema) or a scheduling hiccup ran long are
		// produced late rather than lost: catching up ends as long as a
		// tick takes less than an interval to build. Only ticks that
		// themselves take longer mean more load than this process can
		// carry; then, as the sampler, it skips ticks and says so.
		if missed > 0 && missed <= maxCatchUp && (first || built < g.interval) {
			after, missed = next.Add(g.interval), 0
		}
		first = false
		if missed > 0 {
			g.overruns.Add(uint64(missed))
			// Skipped ticks are missing data: say so, as a lossy tree would.
			for _, name := range g.names {
				g.client.Gap(name, next.Add(g.interval), after.Add(-g.interval))
			}
		}
		next = after
		timer.Reset(max(time.Until(next.Add(-g.lead)), 0))
	}
}
