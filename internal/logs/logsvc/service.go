// Package logsvc is the log service of vigil server: syslog listeners feed
// a miner that assigns each message a pattern and a store that keeps it;
// Handler serves search, tail, patterns and new-pattern events over HTTP.
package logsvc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/pattern"
	"github.com/vigil-hpc/vigil/internal/logs/relp"
	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// Config configures the service. Empty listener addresses disable them.
type Config struct {
	UDPAddr string // e.g. ":514"
	TCPAddr string // e.g. ":601"
	TLSAddr string // e.g. ":6514"; needs TLSCert and TLSKey
	TLSCert string // PEM files
	TLSKey  string
	// RELPAddr receives RELP (rsyslog omrelp), e.g. ":2514": messages are
	// acknowledged once stored, so a sender loses none when we crash.
	RELPAddr string
	DataDir  string // store segments and pattern state

	Retention    time.Duration // 0 keeps forever
	MaxBytes     int64         // bound of the store on disk; 0 unbounded
	SegmentBytes int64         // default 32 MiB
	MaxFrame     int           // largest message; default 64 KiB
	MaxPatterns  int           // default 10000
	Location     *time.Location
	// SaveInterval is how often pattern state is written; default 30s.
	// After a crash, messages stored since are mined again at start-up.
	SaveInterval time.Duration

	// Limits bound TCP, TLS and RELP connections (caps per listener and
	// per source address, idle and frame timeouts); zero fields take the
	// syslog package's defaults.
	Limits syslog.Limits
	// UDPReadBuffer is the UDP socket's receive buffer; default 8 MiB.
	UDPReadBuffer int
	// RELPDedup is how many recent RELP messages are remembered to
	// recognise resends of stored ones; default 65536.
	RELPDedup int
	// Registerer takes the intake's metrics (vigil_syslog_*); nil: none.
	Registerer prometheus.Registerer
	// Metrics writes message counts per pattern into a store (metrics.go);
	// off without Metrics.Appendable.
	Metrics MetricsConfig
	// Events takes an event for every new pattern; nil: events.Discard.
	Events events.Sink
	// Stored, if set, is given each group of records once stored, with
	// their sequence numbers and patterns, under the commit lock; it must
	// not keep recs (the bus spools them; docs/bus.md).
	Stored func(recs []logstore.Record)
}

// Validate checks the configuration without touching the system.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("logs: data directory not set")
	}
	if c.UDPAddr == "" && c.TCPAddr == "" && c.TLSAddr == "" && c.RELPAddr == "" {
		return errors.New("logs: no listener configured (udp, tcp, tls or relp address)")
	}
	if c.TLSAddr != "" && (c.TLSCert == "" || c.TLSKey == "") {
		return errors.New("logs: tls address needs tls_cert and tls_key")
	}
	if c.Metrics.Interval < 0 || c.Metrics.MaxPatternSeries < 0 || c.Metrics.MaxHostSeries < 0 || c.Metrics.TopHosts < 0 || c.Metrics.MaxHostPairs < 0 {
		return errors.New("logs: negative metrics interval or bound")
	}
	if c.Retention < 0 || c.MaxBytes < 0 || c.SegmentBytes < 0 || c.MaxFrame < 0 || c.UDPReadBuffer < 0 || c.RELPDedup < 0 {
		return errors.New("logs: negative retention or size")
	}
	return nil
}

// Service ties listeners, miner and store together.
type Service struct {
	cfg   Config
	log   *slog.Logger
	store *logstore.Store
	srv   *syslog.Server
	relp  *relp.Server // nil without RELPAddr
	dedup *relp.Dedup

	commits chan *commit
	stopped chan struct{} // closed when the committer has exited

	// mu guards the miner and the pattern bookkeeping; the committer holds
	// it while mining and appending a batch, so a saved snapshot matches a
	// sequence number exactly.
	mu       sync.Mutex
	miner    *pattern.Miner
	stats    map[uint64]*patternStats
	aliases  map[uint64]uint64 // stored pattern ids merged into another
	events   eventLog
	counters *logCounters // nil unless cfg.Metrics.Appendable is set
	mcfg     MetricsConfig
	sink     events.Sink
	scratch  []byte
	recs     []logstore.Record
	accepted uint64

	// afterCommit, when set (by tests), runs after each group is stored
	// and before its senders hear of it: the place a crash hurts most.
	afterCommit func(accepted uint64)
}

type commit struct {
	msgs []syslog.Message
	done chan error
}

const (
	minerFile = "patterns.state"
	statsFile = "patterns.json"
)

// New opens the store, restores the pattern state (mining again what was
// stored after the last save) and binds the listeners.
func New(cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "logs")
	if cfg.SaveInterval <= 0 {
		cfg.SaveInterval = 30 * time.Second
	}
	st, err := logstore.Open(logstore.Options{
		Dir:          filepath.Join(cfg.DataDir, "segments"),
		Retention:    cfg.Retention,
		MaxBytes:     cfg.MaxBytes,
		SegmentBytes: cfg.SegmentBytes,
		Log:          log,
	})
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg:     cfg,
		log:     log,
		store:   st,
		commits: make(chan *commit, 64),
		stopped: make(chan struct{}),
		miner:   pattern.New(pattern.Config{MaxPatterns: cfg.MaxPatterns}),
		stats:   map[uint64]*patternStats{},
		aliases: map[uint64]uint64{},
		mcfg:    cfg.Metrics.withDefaults(),
		sink:    cfg.Events,
	}
	if s.sink == nil {
		s.sink = events.Discard
	}
	if cfg.Metrics.Appendable != nil {
		s.counters = newLogCounters()
	}
	if err := s.restore(); err != nil {
		st.Close()
		return nil, err
	}
	var tlsCfg *tls.Config
	if cfg.TLSAddr != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("logs: load tls certificate %s: %w", cfg.TLSCert, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	m := syslog.NewMetrics(cfg.Registerer)
	s.srv = syslog.NewServer(syslog.Config{
		UDPAddr: cfg.UDPAddr, TCPAddr: cfg.TCPAddr, TLSAddr: cfg.TLSAddr, TLSConfig: tlsCfg,
		MaxFrame: cfg.MaxFrame, Location: cfg.Location,
		UDPReadBuffer: cfg.UDPReadBuffer, Limits: cfg.Limits, Metrics: m,
	}, s, log)
	if err := s.srv.Listen(); err != nil {
		st.Close()
		return nil, err
	}
	if cfg.RELPAddr != "" {
		if err := s.loadDedup(); err != nil {
			s.srv.Close()
			st.Close()
			return nil, err
		}
		s.relp = relp.NewServer(relp.Config{
			Addr: cfg.RELPAddr, MaxFrame: cfg.MaxFrame, Limits: cfg.Limits, Location: cfg.Location,
			Metrics: m, Dedup: s.dedup,
		}, s, log)
		if err := s.relp.Listen(); err != nil {
			s.srv.Close()
			st.Close()
			return nil, err
		}
	}
	return s, nil
}

// loadDedup remembers the last RELP messages in the store: those stored
// just before a crash were not acknowledged, and their senders resend
// them.
func (s *Service) loadDedup() error {
	n := s.cfg.RELPDedup
	if n <= 0 {
		n = 65536
	}
	s.dedup = relp.NewDedup(n)
	// RELP messages are a part of the newest records; look at up to
	// 4 times as many records as are remembered.
	last := s.store.LastSeq()
	after := last - min(last, uint64(4*n))
	var m syslog.Message
	for after < last {
		recs, upTo, err := s.store.After(after, logstore.Query{}, 4096)
		if err != nil {
			return fmt.Errorf("logs: read recent relp messages: %w", err)
		}
		for i := range recs {
			if r := &recs[i]; r.Flags&logstore.FlagRELP != 0 {
				m = syslog.Message{Time: r.Time, Host: r.Host, App: r.App, ProcID: r.ProcID, MsgID: r.MsgID,
					SD: r.SD, Text: r.Text, Facility: r.Facility, Severity: r.Severity}
				s.dedup.Add(s.dedup.Key(&m))
			}
		}
		if upTo == after {
			break
		}
		after = upTo
	}
	return nil
}

// RELPAddr is the bound RELP address, nil when disabled.
func (s *Service) RELPAddr() net.Addr {
	if s.relp == nil {
		return nil
	}
	return s.relp.Addr()
}

// Addrs returns the bound listener addresses (nil when disabled).
func (s *Service) Addrs() (udp, tcp, tlsAddr net.Addr) { return s.srv.Addrs() }

// Store exposes the store to tests and tools in this module.
func (s *Service) Store() *logstore.Store { return s.store }

// Run serves until ctx is done. Then the listeners stop, messages already
// read are committed, the pattern state is saved and the store closed.
func (s *Service) Run(ctx context.Context) error {
	go s.commitLoop()
	srvDone := make(chan error, 1)
	go func() { srvDone <- s.srv.Run(ctx) }()
	relpDone := make(chan error, 1)
	if s.relp != nil {
		go func() { relpDone <- s.relp.Run(ctx) }()
	} else {
		relpDone <- nil
	}
	metricsDone := make(chan struct{})
	if s.counters != nil {
		go func() { defer close(metricsDone); s.runMetrics(ctx) }()
	} else {
		close(metricsDone)
	}
	save := time.NewTicker(s.cfg.SaveInterval)
	defer save.Stop()
	retain := time.NewTicker(time.Minute)
	defer retain.Stop()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-save.C:
			if err := s.save(); err != nil {
				s.log.Error("cannot save pattern state", "err", err)
			}
		case <-retain.C:
			if err := s.store.ApplyRetention(); err != nil {
				s.log.Error("retention failed", "err", err)
			}
		}
	}
	err := errors.Join(<-srvDone, <-relpDone)
	<-metricsDone // it writes to a store its owner closes after Run
	close(s.commits)
	<-s.stopped
	if e := s.save(); e != nil {
		err = errors.Join(err, e)
	}
	if e := s.store.Close(); e != nil {
		err = errors.Join(err, e)
	}
	return err
}

// Close releases the listeners and the store. Run does so itself when it
// returns; Close is for a service that never ran (the server failed to
// start) and does nothing more after Run.
func (s *Service) Close() error {
	s.srv.Close()
	if s.relp != nil {
		s.relp.Close()
	}
	return s.store.Close()
}

// Submit implements syslog.Sink: it returns once the messages are in the
// store, fsynced.
func (s *Service) Submit(ctx context.Context, msgs []syslog.Message) error {
	c := &commit{msgs: msgs, done: make(chan error, 1)}
	select {
	case s.commits <- c:
	case <-s.stopped:
		return logstore.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-c.done
}

// commitLoop groups pending submissions into one append and one fsync.
func (s *Service) commitLoop() {
	defer close(s.stopped)
	const maxGroup = 16384
	var group []*commit
	for c := range s.commits {
		group = append(group[:0], c)
		n := len(c.msgs)
	fill:
		for n < maxGroup {
			select {
			case c, ok := <-s.commits:
				if !ok {
					break fill
				}
				group = append(group, c)
				n += len(c.msgs)
			default:
				break fill
			}
		}
		err := s.commitGroup(group)
		if s.afterCommit != nil {
			s.afterCommit(s.accepted)
		}
		for _, c := range group {
			c.done <- err
		}
	}
}

func (s *Service) commitGroup(group []*commit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := s.recs[:0]
	for _, c := range group {
		for i := range c.msgs {
			recs = append(recs, toRecord(&c.msgs[i]))
		}
	}
	s.recs = recs
	var fresh []int
	for i := range recs {
		isNew := s.mine(&recs[i])
		if isNew {
			fresh = append(fresh, i)
		}
	}
	if err := s.store.Append(recs); err != nil {
		// The miner has counted them, the store has not: only counts drift.
		return err
	}
	s.accepted += uint64(len(recs))
	for _, i := range fresh { // Append has set Seq
		s.newPatternEvent(&recs[i], true)
	}
	if s.cfg.Stored != nil {
		s.cfg.Stored(recs)
	}
	clear(recs) // drop references to the frames
	return nil
}

func toRecord(m *syslog.Message) logstore.Record {
	r := logstore.Record{
		Time: m.Time, Received: m.Received, Host: m.Host, App: m.App, ProcID: m.ProcID,
		MsgID: m.MsgID, SD: m.SD, Text: m.Text, Facility: m.Facility, Severity: m.Severity,
	}
	if m.Malformed {
		r.Flags |= logstore.FlagMalformed
	}
	if m.Truncated {
		r.Flags |= logstore.FlagTruncated
	}
	if m.Reliable {
		r.Flags |= logstore.FlagRELP
	}
	return r
}

// mine assigns r its pattern. The app name is part of what is mined, so
// that two programs' identical words stay apart. Called with mu held.
func (s *Service) mine(r *logstore.Record) (isNew bool) {
	b := s.scratch[:0]
	if r.App != "" {
		b = append(b, r.App...)
		b = append(b, ": "...)
	}
	b = append(b, r.Text...)
	s.scratch = b
	id, isNew := s.miner.AddAt(r.Received, b)
	r.Pattern = id
	ps := s.stats[id]
	if ps == nil {
		ps = newPatternStats()
		s.stats[id] = ps
	}
	ps.add(r.Received, r.Host)
	s.count(r, isNew)
	return isNew
}

// newPatternEvent records a new pattern and, when emit is set, puts it on
// the event stream. Patterns found again while mining what was stored
// after the last save were announced before the restart, but for a crash
// between the store's append and the event: a duplicate is the likelier
// harm, so those are not emitted again.
func (s *Service) newPatternEvent(r *logstore.Record, emit bool) {
	tmpl, _ := s.miner.Template(r.Pattern)
	ex := r.Text
	if len(ex) > maxExampleBytes {
		ex = ex[:maxExampleBytes]
	}
	e := Event{Time: r.Received, Pattern: r.Pattern, Template: tmpl,
		Host: clone(r.Host), App: clone(r.App), Example: clone(ex), Seq: r.Seq}
	s.events.add(e)
	s.log.Info("new log pattern", "pattern", e.Pattern, "template", e.Template, "host", e.Host, "app", e.App)
	if emit {
		s.sink.Emit(patternStreamEvent(&e))
	}
}

func clone(s string) string { return string([]byte(s)) }

// savedStats is the pattern bookkeeping on disk, next to the miner state.
type savedStats struct {
	Seq     uint64                   `json:"seq"` // last stored record the state includes
	Stats   map[uint64]*patternStats `json:"stats"`
	Aliases map[uint64]uint64        `json:"aliases"`
	Events  []Event                  `json:"events"`
	// Counters keeps the log metrics' counters monotonic across restarts.
	Counters *savedCounters `json:"counters,omitempty"`
}

// save writes the miner state and the bookkeeping atomically.
func (s *Service) save() error {
	var mb, sb bytes.Buffer
	s.mu.Lock()
	s.prune()
	err := s.miner.Save(&mb)
	if err == nil {
		st := savedStats{Seq: s.store.LastSeq(), Stats: s.stats, Aliases: s.aliases, Events: s.events.events}
		if s.counters != nil {
			st.Counters = s.counters.save()
		}
		err = json.NewEncoder(&sb).Encode(st)
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("logs: encode pattern state: %w", err)
	}
	// The stats name the sequence number; write the miner first so that a
	// crash between the two renames replays more, never less.
	if err := writeFileAtomic(filepath.Join(s.cfg.DataDir, minerFile), mb.Bytes()); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.cfg.DataDir, statsFile), sb.Bytes())
}

// prune folds stats of merged patterns into their survivor and drops those
// of evicted ones, which keeps the map as bounded as the miner. Merged ids
// are remembered as aliases: stored records keep the id they were given.
func (s *Service) prune() {
	for id, ps := range s.stats {
		to, ok := s.miner.Resolve(id)
		switch {
		case !ok:
			delete(s.stats, id)
		case to != id:
			if t := s.stats[to]; t != nil {
				t.merge(ps)
			} else {
				s.stats[to] = ps
			}
			delete(s.stats, id)
			s.aliases[id] = to
		}
	}
	for id := range s.aliases {
		if to, ok := s.miner.Resolve(id); ok && to != id {
			s.aliases[id] = to
		} else {
			delete(s.aliases, id)
		}
	}
}

// expandPattern adds to q the ids merged into q.Pattern, and makes
// q.Pattern the live id. Called with mu held.
func (s *Service) expandPattern(q *logstore.Query) {
	if q.Pattern == 0 {
		return
	}
	s.prune()
	if to, ok := s.miner.Resolve(q.Pattern); ok && to != q.Pattern {
		q.Patterns = append(q.Patterns, q.Pattern)
		q.Pattern = to
	}
	for id, to := range s.aliases {
		if to == q.Pattern && id != q.Pattern {
			q.Patterns = append(q.Patterns, id)
		}
	}
}

// resolvePattern maps a stored pattern id to the live one. Called with mu
// held.
func (s *Service) resolvePattern(id uint64) uint64 {
	if to, ok := s.miner.Resolve(id); ok {
		return to
	}
	return id
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("logs: create %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if e := f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("logs: write %s: %w", path, err)
	}
	return nil
}

// restore loads the saved pattern state and mines the records stored after
// it, so that ids stay stable across a crash.
func (s *Service) restore() error {
	var seq uint64
	mf, err := os.Open(filepath.Join(s.cfg.DataDir, minerFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("logs: %w", err)
	default:
		err := s.miner.Load(mf)
		mf.Close()
		if err != nil {
			return fmt.Errorf("logs: %s: %w", mf.Name(), err)
		}
		var st savedStats
		b, err := os.ReadFile(filepath.Join(s.cfg.DataDir, statsFile))
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			// The miner state alone keeps the ids; counts over time restart.
			s.log.Warn("pattern statistics not restored", "err", err)
		}
		seq = st.Seq
		if st.Stats != nil {
			s.stats = st.Stats
		}
		if st.Aliases != nil {
			s.aliases = st.Aliases
		}
		s.events.events = st.Events
		if st.Counters != nil && s.counters != nil {
			s.counters.load(st.Counters, s.mcfg.MaxPatternSeries)
		}
	}
	replayed := 0
	if s.counters != nil {
		s.counters.restoring = true
		defer func() { s.counters.restoring = false }()
	}
	for {
		recs, upTo, err := s.store.After(seq, logstore.Query{}, 4096)
		if err != nil {
			return fmt.Errorf("logs: replay for patterns: %w", err)
		}
		for i := range recs {
			if s.mine(&recs[i]) {
				s.newPatternEvent(&recs[i], false)
			}
		}
		replayed += len(recs)
		if upTo == seq {
			break
		}
		seq = upTo
	}
	if replayed > 0 {
		s.log.Info("mined stored messages newer than the saved pattern state", "messages", replayed)
	}
	return nil
}
