package ibnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultInterval   = time.Second
	DefaultRediscover = 60 * time.Second
	DefaultMADTimeout = 100 * time.Millisecond
	DefaultRetries    = 1
	DefaultWindow     = 8
	MaxWindow         = 32
)

// Failure reasons counted in Stats.Failures.
const (
	FailHelper   = iota // the helper died, timed out or spoke nonsense
	FailDiscover        // discovery failed (the fabric did not answer)
	FailPort            // a port's MAD failed (switch gone, LID changed)
	// FailUnsupported: a switch refused or did not answer an optional
	// attribute (PortXmitDiscardDetails, PortRcvErrorDetails,
	// PortVLXmitWaitCounters); not a failure of the port, and not asked of
	// that switch again until the next discovery.
	FailUnsupported
	NFailures
)

// FailureReasons names the reasons for the reason label.
var FailureReasons = [NFailures]string{"helper", "discover", "port", "unsupported"}

// Config configures a Sweeper.
type Config struct {
	// Helper is the vigil-ibmad binary.
	Helper string
	// Env is the helper's environment (nil = ours), e.g. with LD_PRELOAD.
	Env []string
	// Dir is the helper's working directory ("" = ours). ibsim's shim
	// writes a fake sysfs (sys-PID/) there.
	Dir string
	// Hosts are the sampler hosts sharing the fabric; Host is this one.
	// Without Hosts this host sweeps every switch.
	Hosts []string
	Host  string
	// Interval between sweeps (Run), Rediscover between discoveries.
	Interval   time.Duration
	Rediscover time.Duration
	// MADTimeout and Retries are passed to the helper (per MAD).
	MADTimeout time.Duration
	Retries    int
	// Window is how many counter MADs the helper keeps in flight (1 =
	// one at a time through libibmad's synchronous mad_rpc; 0 = default).
	Window int
	Logger *slog.Logger
	// vlAttr replaces PortVLXmitWaitCounters' attribute id (tests: one
	// ibsim refuses).
	vlAttr int
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Rediscover <= 0 {
		c.Rediscover = DefaultRediscover
	}
	if c.MADTimeout <= 0 {
		c.MADTimeout = DefaultMADTimeout
	}
	if c.Retries < 0 {
		c.Retries = DefaultRetries
	}
	if c.Window < 1 || c.Window > MaxWindow {
		c.Window = DefaultWindow
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Link is one swept switch port and its remote end: the labels of its
// series. A port seen linked once stays a Link (reported down) until its
// switch disappears from the fabric.
type Link struct {
	SwitchGUID uint64
	Switch     string
	LID        uint16
	Port       int
	RemoteGUID uint64
	Remote     string
	RemotePort int
	RemoteType int
	RemoteLID  uint16
	Width      int
	Speed      int
	ESpeed     int
}

// Avail says which optional counters a link has: Groups holds the
// Flag*s of the attributes read at least once; VLs, when FlagVLXmitWait
// is among them, the VLs whose wait is reported (bit v = VL v): the
// port's operational VLs and any VL whose counter is not zero, so the
// series stay bounded by what the port uses.
type Avail struct {
	Groups uint8
	VLs    uint16
}

// operVLsMask turns PortInfo.OperationalVLs into a VL bit mask.
func operVLsMask(oper int) uint16 {
	switch oper {
	case 1:
		return 0x1
	case 2:
		return 0x3
	case 3:
		return 0xf
	case 4:
		return 0xff
	case 5:
		return 0x7fff
	}
	return 0
}

// SwitchInfo is one assigned switch.
type SwitchInfo struct {
	GUID  uint64
	Desc  string
	LID   uint16
	Level string
}

// Snapshot is the latest sweep, published for readers. Its slices are
// owned by the Sweeper and valid only inside Read's callback.
type Snapshot struct {
	// TopoGen changes whenever Switches or Links (the labels) change.
	TopoGen  uint64
	Switches []SwitchInfo
	Links    []Link
	// Avail, parallel to Links, changes TopoGen too: a link's series set.
	Avail []Avail
	// Per link, parallel to Links: state and monotonic counter totals.
	Up     []bool
	Totals [][NCounters]uint64
	// SweepGen counts completed sweeps.
	SweepGen   uint64
	Time       time.Time
	Duration   time.Duration
	MADTime    time.Duration // mean per MAD of the last sweep, as the helper timed them
	MADs       int           // MADs the helper sent in the last sweep
	PortsSwept int
	Failures   [NFailures]uint64
}

// linkState is the sweeper's private per-link state.
type linkState struct {
	up    bool
	state int
	seen  bool
	oper  uint16 // operational VLs (mask)
	last  [NCounters]uint64
	base  [NCounters]uint64
	total [NCounters]uint64
}

// Sweeper discovers and sweeps its share of the fabric. Sweep is not safe
// for concurrent use; Read is, from any goroutine.
type Sweeper struct {
	cfg Config

	h         *helper
	backoff   time.Duration
	nextStart time.Time

	discovered  time.Time
	rediscover  bool
	links       []Link
	avail       []Avail
	states      []linkState
	switches    []SwitchInfo
	index       map[uint64]int // switchGUID<<8|port → link
	query       []portRef
	queryLink   []int
	topoChanged bool
	failures    [NFailures]uint64
	// The last logged error of each kind (see warnOnce).
	helperKind, discoverKind, portsKind string
	madTotal                            time.Duration // the helper's time for the last sweep's MADs
	mads                                int           // and their number
	swept                               bool          // the last Sweep read the ports

	mu        sync.Mutex
	pub       Snapshot
	first     chan struct{} // closed after the first sweep is published
	firstDone bool
}

type portRef struct {
	lid  uint16
	port uint8
}

// New returns a Sweeper; it starts the helper on the first Sweep.
func New(cfg Config) *Sweeper {
	cfg.defaults()
	return &Sweeper{cfg: cfg, index: map[uint64]int{}, first: make(chan struct{})}
}

// Close stops the helper.
func (s *Sweeper) Close() {
	if s.h != nil {
		s.h.close()
		s.h = nil
	}
}

// FirstSweep is closed once the first sweep (or its failure) is published.
func (s *Sweeper) FirstSweep() <-chan struct{} { return s.first }

// Read calls fn with the latest snapshot under the sweeper's lock.
func (s *Sweeper) Read(fn func(*Snapshot)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.pub)
}

func (s *Sweeper) fail(reason int) {
	s.failures[reason]++
}

// Sweep discovers if due, then reads every assigned port once and
// publishes the result. Errors are counted, logged once per kind and
// returned; the previous totals stay published.
func (s *Sweeper) Sweep(ctx context.Context) error {
	start := time.Now()
	err := s.sweep(ctx, start)
	s.publish(start, err)
	return err
}

func (s *Sweeper) sweep(ctx context.Context, now time.Time) error {
	s.swept = false
	if s.h == nil {
		if now.Before(s.nextStart) {
			return fmt.Errorf("%w: waiting %v before restarting", ErrHelper, s.nextStart.Sub(now).Round(time.Millisecond))
		}
		h, err := startHelper(s.cfg.Helper, s.cfg.Env, s.cfg.Dir, s.cfg.MADTimeout, s.cfg.Retries, s.cfg.Window, s.cfg.vlAttr)
		if err != nil {
			return s.helperFailed(now, err)
		}
		s.h = h
		s.rediscover = true
	}
	if s.rediscover || s.discovered.IsZero() || now.Sub(s.discovered) >= s.cfg.Rediscover {
		// Discovery walks every node with directed-route SMPs: give it time.
		t, err := s.h.discover(30 * time.Second)
		if err != nil {
			if errors.Is(err, ErrHelper) {
				return s.helperFailed(now, err)
			}
			s.fail(FailDiscover)
			s.warnOnce(&s.discoverKind, "fabric discovery failed", err)
			return err
		}
		s.discovered, s.rediscover = now, false
		s.discoverKind = ""
		s.merge(t)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	bad, skipped := 0, 0
	// The helper bounds each MAD; bound the whole batch as well (up to 5
	// MADs a port and a ClassPortInfo a switch).
	timeout := time.Duration((len(s.query)*5+len(s.switches))*(s.cfg.Retries+1))*s.cfg.MADTimeout + 5*time.Second
	madTotal, mads, err := s.h.query(s.query, timeout, func(i int, c *CounterLine) {
		li := s.queryLink[i]
		st := &s.states[li]
		if !c.OK {
			bad++
			return
		}
		if c.Flags&FlagsSkipped != 0 {
			skipped += bits.OnesCount8(c.Flags & FlagsSkipped)
		}
		for k := range NCounters {
			if g := CounterGroup(k); g != 0 && c.Flags&g == 0 {
				continue // not read this sweep: keep the total
			}
			v := c.V[k]
			if st.seen && v < st.last[k] {
				// A reset or a wrap: carry on from the previous total.
				st.base[k] += st.last[k]
			}
			st.last[k] = v
			st.total[k] = st.base[k] + v
		}
		st.seen = true
		a := s.avail[li]
		a.Groups |= c.Flags & FlagsRead
		a.VLs = availVLs(a.Groups, st)
		if a != s.avail[li] {
			s.avail[li] = a
			s.topoChanged = true // the link's series set changed
		}
	})
	s.failures[FailUnsupported] += uint64(skipped)
	if err != nil {
		return s.helperFailed(now, err)
	}
	s.backoff = 0
	s.helperKind = ""
	s.madTotal, s.mads = madTotal, mads
	s.swept = true // the ports were read (some may have failed)
	if bad > 0 {
		s.failures[FailPort] += uint64(bad)
		s.rediscover = true // a LID or GUID may have changed, or a link gone
		err := fmt.Errorf("%d of %d ports did not answer", bad, len(s.query))
		s.warnOnce(&s.portsKind, "fabric sweep: ports failed", err)
		return err
	}
	s.portsKind = ""
	return nil
}

func (s *Sweeper) helperFailed(now time.Time, err error) error {
	s.fail(FailHelper)
	s.warnOnce(&s.helperKind, "fabric sweep helper failed; restarting with backoff", err)
	if s.h != nil {
		s.h.close()
		s.h = nil
	}
	switch {
	case s.backoff == 0:
		s.backoff = time.Second
	case s.backoff < 30*time.Second:
		s.backoff *= 2
	}
	s.nextStart = now.Add(s.backoff)
	return err
}

// merge folds a new topology into the link table: links keep their
// counters by (switch GUID, port); a port that lost its remote keeps its
// last remote and is reported down; switches gone (or renamed by a GUID
// change) drop out.
func (s *Sweeper) merge(t Topology) {
	mine := t
	if len(s.cfg.Hosts) > 0 {
		split := Split(t, s.cfg.Hosts)
		mine.Switches = nil
		for _, sw := range t.Switches {
			if split[sw.GUID] == s.cfg.Host {
				mine.Switches = append(mine.Switches, sw)
			}
		}
	}
	lv := Levels(t)
	var links []Link
	var avail []Avail
	var states []linkState
	var switches []SwitchInfo
	index := make(map[uint64]int, len(s.index))
	for _, sw := range mine.Switches {
		switches = append(switches, SwitchInfo{GUID: sw.GUID, Desc: sw.Desc, LID: sw.LID, Level: lv[sw.GUID]})
		for _, p := range sw.Ports {
			key := sw.GUID<<8 | uint64(p.Num)
			old, had := s.index[key]
			if p.RemoteGUID == 0 && !had {
				continue // never linked
			}
			l := Link{SwitchGUID: sw.GUID, Switch: sw.Desc, LID: sw.LID, Port: p.Num,
				RemoteGUID: p.RemoteGUID, Remote: p.RemoteDesc, RemotePort: p.RemotePort,
				RemoteType: p.RemoteType, RemoteLID: p.RemoteLID, Width: p.Width, Speed: p.Speed, ESpeed: p.ESpeed}
			var st linkState
			var a Avail
			if had {
				a = s.avail[old]
				st = s.states[old]
				if p.RemoteGUID == 0 {
					// Down: keep the last known far end and rate.
					prev := s.links[old]
					l.RemoteGUID, l.Remote, l.RemotePort = prev.RemoteGUID, prev.Remote, prev.RemotePort
					l.RemoteType, l.RemoteLID = prev.RemoteType, prev.RemoteLID
					l.Width, l.Speed, l.ESpeed = prev.Width, prev.Speed, prev.ESpeed
				}
			}
			st.state = p.State
			st.up = p.State == StateActive
			if p.RemoteGUID != 0 { // a down port keeps its last VLs
				st.oper = operVLsMask(p.OperVLs)
			}
			a.VLs = availVLs(a.Groups, &st)
			index[key] = len(links)
			links = append(links, l)
			avail = append(avail, a)
			states = append(states, st)
		}
	}
	if !slices.Equal(links, s.links) || !slices.Equal(switches, s.switches) || !slices.Equal(avail, s.avail) {
		s.topoChanged = true
	}
	s.links, s.avail, s.states, s.switches, s.index = links, avail, states, switches, index
	s.query, s.queryLink = s.query[:0], s.queryLink[:0]
	for i, l := range links {
		if states[i].state > StateDown && l.LID != 0 {
			s.query = append(s.query, portRef{lid: l.LID, port: uint8(l.Port)})
			s.queryLink = append(s.queryLink, i)
		}
	}
}

// publish copies the sweep's result to the snapshot; in steady state
// (same topology) it reuses the snapshot's storage.
func (s *Sweeper) publish(start time.Time, err error) {
	end := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &s.pub
	if s.topoChanged {
		s.topoChanged = false
		p.TopoGen++
		p.Switches = slices.Clone(s.switches)
		p.Links = slices.Clone(s.links)
		p.Avail = slices.Clone(s.avail)
		p.Up = make([]bool, len(s.links))
		p.Totals = make([][NCounters]uint64, len(s.links))
	}
	for i := range s.states {
		p.Up[i] = s.states[i].up
		p.Totals[i] = s.states[i].total
	}
	p.Failures = s.failures
	if !s.firstDone {
		s.firstDone = true
		close(s.first)
	}
	if s.swept {
		p.SweepGen++
		p.Time = start
		p.Duration = end.Sub(start)
		p.PortsSwept = len(s.query)
		p.MADs = s.mads
		if s.mads > 0 {
			p.MADTime = s.madTotal / time.Duration(s.mads)
		}
	}
}

// availVLs is the VLs a link reports: none until its VL counters were
// read, then its operational VLs and every VL counted so far.
func availVLs(groups uint8, st *linkState) uint16 {
	if groups&FlagVLXmitWait == 0 {
		return 0
	}
	m := st.oper
	for v := range NVLs {
		if st.total[CVLXmitWait0+v] != 0 {
			m |= 1 << v
		}
	}
	return m
}

// Run sweeps every Interval, starting offset after each aligned multiple
// of Interval, until ctx ends.
func (s *Sweeper) Run(ctx context.Context, offset time.Duration) {
	defer s.Close()
	t := time.NewTimer(time.Until(nextAligned(time.Now(), s.cfg.Interval, offset)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = s.Sweep(ctx) // counted and logged inside
		t.Reset(time.Until(nextAligned(time.Now(), s.cfg.Interval, offset)))
	}
}

func nextAligned(now time.Time, every, offset time.Duration) time.Time {
	next := now.Truncate(every).Add(offset)
	for !next.After(now) {
		next = next.Add(every)
	}
	return next
}

// warnOnce logs err unless the last error of its kind (*last) read the
// same with numbers masked: pids, counts and durations vary from one
// failure to the next. A success clears *last.
func (s *Sweeper) warnOnce(last *string, msg string, err error) {
	if k := maskDigits(err.Error()); k != *last {
		*last = k
		s.cfg.Logger.Warn(msg, "err", err)
	}
}

func maskDigits(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= '0' && c <= '9' {
			b[i] = '#'
		}
	}
	return string(b)
}
