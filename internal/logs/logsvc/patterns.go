package logsvc

import (
	"slices"
	"time"
)

// Bounds of the per-pattern bookkeeping that the miner does not do itself.
const (
	maxHostsPerPattern = 16
	maxEvents          = 1000
	minuteBuckets      = 60
	hourBuckets        = 48
	maxExampleBytes    = 512
)

// Series counts events in fixed-width time buckets, newest last; end is the
// index (Unix time / width) of the newest bucket.
type Series struct {
	Width  int64    `json:"width_s"`
	End    int64    `json:"end"`
	Counts []uint32 `json:"counts"`
}

func newSeries(width int64, n int) Series {
	return Series{Width: width, Counts: make([]uint32, n)}
}

func (s *Series) add(t time.Time) {
	k := t.Unix() / s.Width
	s.advance(k)
	s.addAt(k, 1)
}

// advance moves the window so that bucket k is the newest, when k is newer.
func (s *Series) advance(k int64) {
	if k <= s.End {
		return
	}
	n := int64(len(s.Counts))
	shift := min(k-s.End, n)
	copy(s.Counts, s.Counts[shift:])
	clear(s.Counts[n-shift:])
	s.End = k
}

// merge adds o's counts into s, aligning buckets.
func (s *Series) merge(o *Series) {
	s.advance(o.End)
	for i, c := range o.Counts {
		s.addAt(o.End-int64(len(o.Counts)-1-i), c)
	}
}

func (s *Series) addAt(k int64, c uint32) {
	n := int64(len(s.Counts))
	if k > s.End || k <= s.End-n {
		return
	}
	s.Counts[n-1-(s.End-k)] += c
}

// HostCount is one host seen with a pattern.
type HostCount struct {
	Host  string `json:"host"`
	Count uint64 `json:"count"`
}

// patternStats is what the service adds to the miner's view of a pattern:
// counts over time and hosts.
type patternStats struct {
	Minutes       Series      `json:"minutes"`
	Hours         Series      `json:"hours"`
	Hosts         []HostCount `json:"hosts"`
	HostsOverflow uint64      `json:"hosts_overflow"` // messages from hosts beyond the bound
}

func newPatternStats() *patternStats {
	return &patternStats{Minutes: newSeries(60, minuteBuckets), Hours: newSeries(3600, hourBuckets)}
}

func (p *patternStats) add(t time.Time, host string) {
	p.Minutes.add(t)
	p.Hours.add(t)
	for i := range p.Hosts {
		if p.Hosts[i].Host == host {
			p.Hosts[i].Count++
			return
		}
	}
	if len(p.Hosts) < maxHostsPerPattern {
		// Copy: host points into a frame that is not kept.
		p.Hosts = append(p.Hosts, HostCount{Host: string([]byte(host)), Count: 1})
		return
	}
	p.HostsOverflow++
}

func (p *patternStats) merge(o *patternStats) {
	p.Minutes.merge(&o.Minutes)
	p.Hours.merge(&o.Hours)
	for _, h := range o.Hosts {
		found := false
		for i := range p.Hosts {
			if p.Hosts[i].Host == h.Host {
				p.Hosts[i].Count += h.Count
				found = true
				break
			}
		}
		switch {
		case found:
		case len(p.Hosts) < maxHostsPerPattern:
			p.Hosts = append(p.Hosts, h)
		default:
			p.HostsOverflow += h.Count
		}
	}
	p.HostsOverflow += o.HostsOverflow
}

// Event reports a pattern seen for the first time.
type Event struct {
	Time     time.Time `json:"time"`
	Pattern  uint64    `json:"pattern"`
	Template string    `json:"template"`
	Host     string    `json:"host"`
	App      string    `json:"app"`
	Example  string    `json:"example"`
	Seq      uint64    `json:"seq"`
}

// eventLog keeps the newest maxEvents events.
type eventLog struct {
	events []Event
}

func (l *eventLog) add(e Event) {
	if len(l.events) >= maxEvents {
		copy(l.events, l.events[1:])
		l.events = l.events[:len(l.events)-1]
	}
	l.events = append(l.events, e)
}

func (s *Series) clone() Series {
	c := *s
	c.Counts = slices.Clone(s.Counts)
	return c
}

// advanceTo moves the window to now, so that quiet time reads as zeros.
func (s *Series) advanceTo(now time.Time) {
	if len(s.Counts) > 0 && s.Width > 0 {
		s.advance(now.Unix() / s.Width)
	}
}
