// Package aggregator is one tier of the tree: it takes wire streams from
// samplers or lower aggregators, tracks which nodes are up, and forwards
// every tick upstream in order, buffering while the upstream is away.
package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/gctune"
	"github.com/vigil-hpc/vigil/internal/httpsec"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/treestate"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/internal/wire/wiremetrics"
)

// Config is an aggregator's settings.
type Config struct {
	Name     string
	Listen   string   // wire listener for children
	Upstream []string // failover order
	HTTP     string   // /metrics and /api/tree; empty: none
	Key      []byte   // shared key; nil: loopback peers only
	// Interval is the children's sampling interval: a child silent for
	// 3 intervals is marked down.
	Interval time.Duration
	// Children lists expected nodes (names or host:port); ChildrenFile is a
	// host-list file re-read when it changes or on Reload.
	Children     []string
	ChildrenFile string
	// BufferBytes bounds data held for an absent upstream.
	BufferBytes int
	Log         *slog.Logger
	// WebConfig is a Prometheus web configuration file (TLS, basic auth,
	// client certificates) for HTTP; empty: plain HTTP, no auth.
	WebConfig string
	// WireLimits cap the children's connections (0: wire's defaults).
	WireLimits config.WireLimits
	// DebugPprof serves Go's profiles under /debug/pprof/ on HTTP.
	DebugPprof bool
	// CheckValues checks relayed value codes before passing them on
	// (wire.ServerOptions.CheckRelayedValues); without it the aggregator
	// reads no value codes and the server isolates a bad frame.
	CheckValues bool
}

// gcPercent is the aggregator's GOGC unless the environment sets one.
const gcPercent = 25

// DefaultBufferBytes holds about five minutes of 1,000 nodes × 300 values
// at about 1.5 bytes per value.
const DefaultBufferBytes = 512 << 20

type streamKey struct {
	node  string
	first *metric.Desc
}

// Aggregator implements wire.Handler and forwards upstream.
type Aggregator struct {
	cfg    Config
	log    *slog.Logger
	client *wire.Client
	live   *treestate.Liveness
	wstats wire.ServerStats

	mu      sync.Mutex // guards streams and serialises forwarding counts
	streams map[streamKey]*fwdStream
	self    *wire.ClientStream

	received  atomic.Uint64
	forwarded atomic.Uint64
	dropped   atomic.Uint64
	gaps      atomic.Uint64
	maxLag    atomic.Int64 // nanoseconds, max over the current interval
	lastLag   atomic.Int64 // max of the previous interval
	selfMu    sync.Mutex
	selfBatch metric.Batch
	selfDescs selfDescs
	reload    chan struct{}
	reg       *prometheus.Registry // served on /metrics
	lag       lagMetrics
	httpm     *httpsec.Metrics
	fileMod   time.Time    // children file's mtime when last read (housekeeping only)
	boundAddr atomic.Value // string: the listener's address once bound
}

// New checks the configuration.
func New(cfg Config) (*Aggregator, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.Name == "" {
		h, _ := os.Hostname()
		cfg.Name = h
	}
	if cfg.Listen == "" {
		return nil, errors.New("aggregator: no listen address")
	}
	if len(cfg.Upstream) == 0 {
		return nil, errors.New("aggregator: no upstream address (--upstream host:port)")
	}
	log := cfg.Log.With("component", "aggregator", "name", cfg.Name)
	a := &Aggregator{
		cfg: cfg, log: log,
		live:    treestate.NewLiveness(3 * cfg.Interval),
		streams: map[streamKey]*fwdStream{},
		reload:  make(chan struct{}, 1),
	}
	a.reg = prometheus.NewRegistry()
	a.lag = newLagMetrics(a.reg)
	client, err := wire.NewClient(wire.ClientOptions{
		Addrs: cfg.Upstream, Key: cfg.Key, Name: cfg.Name, Log: log,
		MaxQueueBytes: cfg.BufferBytes, MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
		Written: a.lag.written,
	})
	if err != nil {
		return nil, err
	}
	a.client = client
	a.selfDescs = newSelfDescs(cfg.Name)
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&selfCollector{a: a, descs: map[*metric.Desc]*prometheus.Desc{}})
	a.httpm = httpsec.NewMetrics(a.reg)
	a.self = client.NewStream(cfg.Name)
	if err := a.loadChildren(); err != nil {
		return nil, err
	}
	return a, nil
}

// Liveness exposes the children's up/down state.
func (a *Aggregator) Liveness() *treestate.Liveness { return a.live }

// Reload re-reads the children file (SIGHUP).
func (a *Aggregator) Reload() {
	select {
	case a.reload <- struct{}{}:
	default:
	}
}

// Addr is the bound wire address (useful with port 0), empty before Run binds.
func (a *Aggregator) Addr() string {
	s, _ := a.boundAddr.Load().(string)
	return s
}

func (a *Aggregator) loadChildren() error {
	nodes := make([]string, 0, len(a.cfg.Children))
	for _, c := range a.cfg.Children {
		nodes = append(nodes, treestate.HostOf(c))
	}
	if a.cfg.ChildrenFile != "" {
		// The time is taken before reading, so a change during the read
		// is seen on the next check.
		if st, err := os.Stat(a.cfg.ChildrenFile); err == nil {
			a.fileMod = st.ModTime()
		}
		fromFile, err := treestate.ReadHostFile(a.cfg.ChildrenFile)
		if err != nil {
			return err
		}
		nodes = append(nodes, fromFile...)
	}
	a.live.SetExpected(nodes)
	return nil
}

// Run serves children and forwards until ctx is done.
func (a *Aggregator) Run(ctx context.Context) error {
	// The live heap is the copies of the children's tables, allocated
	// only when series change (under 1 MB/s for 20,000 nodes), so
	// collecting at +25 % costs little CPU (a collection a minute) and
	// keeps RSS near it.
	gctune.Apply(a.log, gcPercent)
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("aggregator listen: %w", err)
	}
	a.boundAddr.Store(ln.Addr().String())
	if a.cfg.Key == nil {
		a.log.Warn("no key: accepting loopback children only; use --key FILE for remote nodes")
	}
	a.log.Info("aggregator started", "listen", ln.Addr().String(), "upstream", a.cfg.Upstream, "http", a.cfg.HTTP)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	start := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				errc <- err
			}
		}()
	}
	// Children learn a tick was handled only once the upstream has it,
	// so a kill -9 here leaves them to report what it held as gaps. Made
	// (and its metrics registered) before anything serves /metrics.
	opts := wire.ServerOptions{Key: a.cfg.Key, Name: a.cfg.Name, Log: a.log, Stats: &a.wstats, Metrics: wiremetrics.New(a.reg),
		CheckRelayedValues: a.cfg.CheckValues,
		HandledBefore:      a.client.DeliveredBefore}
	a.cfg.WireLimits.Apply(&opts)
	start(func() error { return a.client.Run(ctx) })
	start(func() error { return wire.Serve(ctx, ln, opts, a) })
	start(func() error { a.housekeeping(ctx); return nil })
	if a.cfg.HTTP != "" {
		hl, err := net.Listen("tcp", a.cfg.HTTP)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("aggregator http: %w", err)
		}
		if a.cfg.WebConfig == "" && !httpsec.IsLoopback(hl.Addr().String()) {
			a.log.Info("HTTP (/metrics, /api/tree; read-only) open to every peer; --web-config adds TLS and basic auth", "http", hl.Addr().String())
		}
		start(func() error {
			return httpsec.Serve(ctx, hl, a.Handler(), httpsec.Options{
				WebConfigFile: a.cfg.WebConfig, ConnState: a.httpm.ConnState, Outer: a.httpm.Outer, Logger: a.log.With("component", "http"),
			})
		})
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	wg.Wait()
	return err
}

// housekeeping marks silent children down, re-reads the children file and
// sends the aggregator's own health upstream once per interval.
func (a *Aggregator) housekeeping(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval / 2)
	defer t.Stop()
	nextSelf := time.Now().Truncate(a.cfg.Interval).Add(a.cfg.Interval)
	// Expected children that are down, never connected ones included, are
	// reported upstream every DownAfter (the first time once they had
	// that long to connect), so the server shows them down for as long as
	// they stay away and learns them again after it restarts.
	nextReport := time.Now().Add(a.live.DownAfter)
	behind := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.reload:
			a.reloadChildren()
		case now := <-t.C:
			// When this aggregator is itself behind (ticks arriving late
			// because it cannot keep up), silence says nothing about the
			// children: judge them again once it has caught up.
			if a.live.Behind() {
				if !behind {
					a.log.Warn("aggregator behind its children; not marking silent children down meanwhile", "lag", time.Duration(a.maxLag.Load()))
					behind = true
				}
			} else {
				behind = false
				for _, n := range a.live.Sweep(now) {
					a.log.Info("child down", "node", n)
					a.client.NodeState(n, false, now)
				}
			}
			if !now.Before(nextReport) {
				for _, n := range a.live.ExpectedDown() {
					a.client.NodeState(n, false, now)
				}
				nextReport = now.Add(a.live.DownAfter)
			}
			if a.cfg.ChildrenFile != "" {
				if st, err := os.Stat(a.cfg.ChildrenFile); err == nil && !st.ModTime().Equal(a.fileMod) {
					a.reloadChildren()
				}
			}
			if !now.Before(nextSelf) {
				a.lastLag.Store(a.maxLag.Swap(0))
				a.sendSelf(nextSelf)
				nextSelf = nextSelf.Add(a.cfg.Interval)
				if nextSelf.Before(now) {
					nextSelf = now.Truncate(a.cfg.Interval).Add(a.cfg.Interval)
				}
			}
		}
	}
}

func (a *Aggregator) reloadChildren() {
	if err := a.loadChildren(); err != nil {
		a.log.Error("children file not reloaded", "err", err)
		return
	}
	a.log.Info("children reloaded", "file", a.cfg.ChildrenFile)
}

// Connect implements wire.Handler.
func (a *Aggregator) Connect(p wire.Peer) {
	a.log.Debug("child connected", "peer", p.Addr, "name", p.Name)
}

// Disconnect implements wire.Handler.
func (a *Aggregator) Disconnect(p wire.Peer, err error) {
	a.log.Debug("child disconnected", "peer", p.Addr, "name", p.Name, "err", err)
}

// Schema implements wire.Handler; streams are found per tick.
func (a *Aggregator) Schema(string, []*metric.Desc) {}

// fwdStream is how a node's stream goes upstream: its children's frames
// passed on as they are (rs), or, for ticks handed over decoded (Tick),
// encoded again (cs). Each is created when first needed.
type fwdStream struct {
	rs, cs *wire.ClientStream
	live   treestate.NodeRef // the node's liveness, found without a lookup
}

// stream returns the forwarding of node's stream whose series start with
// first, and creates it if needed; a.mu is held.
func (a *Aggregator) stream(node string, first *metric.Desc) *fwdStream {
	k := streamKey{node, first}
	fs := a.streams[k]
	if fs == nil {
		fs = &fwdStream{live: a.live.Ref(node)}
		a.streams[k] = fs
	}
	return fs
}

// relayStream returns where a child's stream goes. A child stream keeps
// its forwarding once bound, whatever its series become; it is bound on
// its first frame by node and first series, so a child that connects
// again continues the streams it had.
func (a *Aggregator) relayStream(node string, src *wire.RelaySource, table wire.Table, runs []int32) *wire.ClientStream {
	if fs, ok := src.Fwd.(*fwdStream); ok {
		return fs.rs
	}
	var first *metric.Desc
	if len(runs) > 0 {
		first = table.At(int(runs[0]))
	}
	fs := a.stream(node, first)
	if fs.rs == nil {
		fs.rs = a.client.NewRelayStream(node)
	}
	src.Fwd = fs
	return fs.rs
}

// Tick implements wire.Handler: forward one tick of one node, encoding it
// again. Children's frames come through RelayTick instead.
func (a *Aggregator) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) {
	a.arrived(node, nil, t, time.Now(), len(values))
	var first *metric.Desc
	if len(descs) > 0 {
		first = descs[0]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fs := a.stream(node, first)
	if fs.cs == nil {
		fs.cs = a.client.NewStream(node)
	}
	before := a.client.Stats().Dropped.Load()
	a.client.Tick(fs.cs, t, descs, values)
	a.lag.encoded.Inc()
	a.counted(before, len(values))
}

// RelaySchema implements wire.RelayHandler: pass a child's schema on, so
// the upstream's table of the stream stays the child's.
func (a *Aggregator) RelaySchema(node string, sc *wire.RelaySchema) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.client.RelaySchema(a.relayStream(node, sc.Source, sc.Table, sc.Runs), sc)
}

// RelayTick implements wire.RelayHandler: forward one tick of one node,
// passing its frame on as it came.
func (a *Aggregator) RelayTick(node string, t time.Time, f *wire.RelayFrame) {
	// The stream's forwarding, once bound, is only set by this
	// connection's reader (under a.mu): read here without it.
	var ref *treestate.NodeRef
	if fs, ok := f.Source.Fwd.(*fwdStream); ok {
		ref = &fs.live
	}
	now := f.Arrived
	if now.IsZero() {
		now = time.Now()
	}
	a.arrived(node, ref, t, now, f.N)
	a.mu.Lock()
	defer a.mu.Unlock()
	before := a.client.Stats().Dropped.Load()
	if a.client.Relay(a.relayStream(node, f.Source, f.Table, f.Runs), t, f) {
		a.lag.relayed.Inc()
	} else {
		a.lag.lost.Inc()
	}
	a.counted(before, f.N)
}

// Drained implements wire.Drainer: a connection's input is handled, so
// what it relayed goes upstream now.
func (a *Aggregator) Drained() { a.client.Flush() }

// arrived notes a child's tick of n values stamped t, arrived at now:
// liveness (through ref when the stream has one) and lag.
func (a *Aggregator) arrived(node string, ref *treestate.NodeRef, t, now time.Time, n int) {
	a.received.Add(uint64(n))
	lag := now.Sub(t)
	if int64(lag) > a.maxLag.Load() {
		a.maxLag.Store(int64(lag))
	}
	a.lag.received.Observe(lag.Seconds())
	var joined bool
	if ref != nil {
		joined = a.live.SeenRef(ref, t, now)
	} else {
		joined = a.live.Seen(node, t, now)
	}
	if joined {
		a.client.NodeState(node, true, t)
	}
}

// counted counts a tick of n values as forwarded, or as dropped if the
// client dropped a tick meanwhile (then or to make room); a.mu is held.
func (a *Aggregator) counted(droppedBefore uint64, n int) {
	if a.client.Stats().Dropped.Load() != droppedBefore {
		a.dropped.Add(uint64(n))
	} else {
		a.forwarded.Add(uint64(n))
	}
}

// Gap implements wire.Handler: pass lower tiers' gaps on.
func (a *Aggregator) Gap(node string, from, to time.Time) {
	a.gaps.Add(1)
	a.client.Gap(node, from, to)
}

// NodeState implements wire.Handler: pass lower tiers' node states on.
func (a *Aggregator) NodeState(node string, up bool, t time.Time) {
	a.client.NodeState(node, up, t)
}

// RelayIORecords implements wire.IORecordRelay: pass a child's per-file
// I/O records on as the frame it sent (checked by the decoder, neither
// decoded nor encoded again), kept until the upstream acknowledges them.
func (a *Aggregator) RelayIORecords(payload []byte, n int) error {
	a.client.RelayIORecords(payload, n)
	return nil
}
