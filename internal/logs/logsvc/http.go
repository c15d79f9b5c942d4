package logsvc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// Prefix is where vigil server mounts Handler; requests may arrive with or
// without it.
const Prefix = "/api/v1/logs"

// Limits of one response.
const (
	defaultLimit = 100
	maxLimit     = 10000
	tailBatch    = 1000
)

// Record is a stored message in API responses.
type Record struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Received  time.Time `json:"received"`
	Host      string    `json:"host"`
	App       string    `json:"app,omitempty"`
	ProcID    string    `json:"procid,omitempty"`
	MsgID     string    `json:"msgid,omitempty"`
	SD        string    `json:"sd,omitempty"`
	Severity  string    `json:"severity"`
	Facility  uint8     `json:"facility"`
	Pattern   uint64    `json:"pattern"`
	Text      string    `json:"text"`
	Malformed bool      `json:"malformed,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
}

func apiRecord(r *logstore.Record) Record {
	return Record{
		Seq: r.Seq, Time: r.Time, Received: r.Received, Host: r.Host, App: r.App, ProcID: r.ProcID,
		MsgID: r.MsgID, SD: r.SD, Severity: syslog.SeverityName(r.Severity), Facility: r.Facility,
		Pattern: r.Pattern, Text: r.Text,
		Malformed: r.Flags&logstore.FlagMalformed != 0, Truncated: r.Flags&logstore.FlagTruncated != 0,
	}
}

// SearchResponse is the answer of GET /search. NextCursor, when set, is
// the cursor parameter of the next (older) page.
type SearchResponse struct {
	Records    []Record `json:"records"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// Pattern is one mined pattern with its counts.
type Pattern struct {
	ID            uint64      `json:"id"`
	Template      string      `json:"template"`
	Count         uint64      `json:"count"`
	FirstSeen     time.Time   `json:"first_seen"`
	LastSeen      time.Time   `json:"last_seen"`
	Examples      []string    `json:"examples"`
	Hosts         []HostCount `json:"hosts"`
	HostsOverflow uint64      `json:"hosts_overflow,omitempty"`
	PerMinute     Series      `json:"per_minute"`
	PerHour       Series      `json:"per_hour"`
}

// PatternsResponse is the answer of GET /patterns.
type PatternsResponse struct {
	Total    int       `json:"total"`
	Patterns []Pattern `json:"patterns"`
}

// EventsResponse is the answer of GET /patterns/events, newest first.
type EventsResponse struct {
	Events []Event `json:"events"`
}

// Stats is the answer of GET /stats.
type Stats struct {
	Accepted    uint64         `json:"accepted"` // messages durable in the store since start
	Received    uint64         `json:"received"`
	Malformed   uint64         `json:"malformed"`
	Truncated   uint64         `json:"truncated"`
	Rejected    uint64         `json:"rejected_frames"`
	UDPReceived uint64         `json:"udp_received"`
	UDPDropped  uint64         `json:"udp_dropped"`
	UDPKernel   uint64         `json:"udp_kernel_dropped"`
	SinkErrors  uint64         `json:"store_errors"`
	ConnsOpen   int64          `json:"connections_open"`
	ConnsTotal  uint64         `json:"connections_total"`
	Patterns    int            `json:"patterns"`
	Store       logstore.Stats `json:"store"`
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	c := s.srv.Stats()
	s.mu.Lock()
	acc, np := s.accepted, s.miner.Len()
	s.mu.Unlock()
	return Stats{
		Accepted: acc, Received: c.Received.Load(), Malformed: c.Malformed.Load(), Truncated: c.Truncated.Load(),
		Rejected: c.Rejected.Load(), UDPReceived: c.UDPReceived.Load(), UDPDropped: c.UDPDropped.Load(),
		UDPKernel:  c.UDPKernelDropped.Load(),
		SinkErrors: c.SinkErrors.Load(), ConnsOpen: c.ConnsOpen.Load(), ConnsTotal: c.ConnsTotal.Load(),
		Patterns: np, Store: s.store.Stats(),
	}
}

// Handler serves the HTTP API:
//
//	GET /search?q=QUERY&since=DUR&from=T&to=T&limit=N&cursor=C   newest first
//	GET /tail?q=QUERY&after=SEQ        server-sent events, one record per event
//	GET /patterns?limit=N&sort=count|recent|new
//	GET /patterns/events?since=DUR     new-pattern events, newest first
//	GET /stats
//
// under Prefix or at the root. Errors are JSON {"error": "..."}, with
// status 400 for a bad request.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", s.handleSearch)
	mux.HandleFunc("GET /tail", s.handleTail)
	mux.HandleFunc("GET /patterns", s.handlePatterns)
	mux.HandleFunc("GET /patterns/events", s.handleEvents)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.Stats()) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint %s (have search, tail, patterns, patterns/events, stats)", r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, Prefix); ok {
			r2 := *r
			u := *r.URL
			u.Path, u.RawPath = p, ""
			if u.Path == "" {
				u.Path = "/"
			}
			r2.URL = &u
			r = &r2
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// parseTime accepts RFC 3339 or Unix seconds.
func parseTime(name, v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	return time.Time{}, fmt.Errorf("%s=%q: want an RFC 3339 time or Unix seconds", name, v)
}

// parseQuery reads q, since, from and to.
func parseQuery(r *http.Request) (logstore.Query, error) {
	v := r.URL.Query()
	q, err := logstore.ParseQuery(v.Get("q"))
	if err != nil {
		return q, fmt.Errorf("q: %w", err)
	}
	if d := v.Get("since"); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil || dur <= 0 {
			return q, fmt.Errorf("since=%q: want a positive duration such as 15m or 2h", d)
		}
		q.From = time.Now().Add(-dur)
	}
	if f := v.Get("from"); f != "" {
		if q.From, err = parseTime("from", f); err != nil {
			return q, err
		}
	}
	if t := v.Get("to"); t != "" {
		if q.To, err = parseTime("to", t); err != nil {
			return q, err
		}
	}
	return q, nil
}

func parseUintParam(r *http.Request, name string, def, max uint64) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || (max > 0 && n > max) {
		if max > 0 {
			return 0, fmt.Errorf("%s=%q: want a number up to %d", name, v, max)
		}
		return 0, fmt.Errorf("%s=%q: want a non-negative number", name, v)
	}
	return n, nil
}

func (s *Service) handleSearch(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	limit, err := parseUintParam(r, "limit", defaultLimit, maxLimit)
	if err == nil && limit == 0 {
		err = fmt.Errorf("limit=0: want at least 1")
	}
	var cursor uint64
	if err == nil {
		cursor, err = parseUintParam(r, "cursor", 0, 0)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	s.mu.Lock()
	s.expandPattern(&q)
	s.mu.Unlock()
	recs, next, err := s.store.Search(q, cursor, int(limit))
	if err != nil {
		s.log.Error("search failed", "err", err)
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	resp := SearchResponse{Records: make([]Record, len(recs))}
	s.mu.Lock()
	for i := range recs {
		recs[i].Pattern = s.resolvePattern(recs[i].Pattern)
	}
	s.mu.Unlock()
	for i := range recs {
		resp.Records[i] = apiRecord(&recs[i])
	}
	if next != 0 {
		resp.NextCursor = strconv.FormatUint(next, 10)
	}
	writeJSON(w, resp)
}

// handleTail streams records stored after "after" (default: now) as
// server-sent events until the client goes away.
func (s *Service) handleTail(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	after, err := parseUintParam(r, "after", s.store.LastSeq(), 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	s.mu.Lock()
	s.expandPattern(&q)
	s.mu.Unlock()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	var buf []byte
	for {
		changed := s.store.Changed() // before reading, so no append is missed
		recs, upTo, err := s.store.After(after, q, tailBatch)
		if err != nil {
			fmt.Fprintf(w, "event: error\ndata: %q\n\n", err.Error())
			return
		}
		after = upTo
		s.mu.Lock()
		for i := range recs {
			recs[i].Pattern = s.resolvePattern(recs[i].Pattern)
		}
		s.mu.Unlock()
		for i := range recs {
			buf = fmt.Appendf(buf[:0], "id: %d\ndata: ", recs[i].Seq)
			j, _ := json.Marshal(apiRecord(&recs[i]))
			buf = append(append(buf, j...), "\n\n"...)
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
		if len(recs) > 0 {
			if err := rc.Flush(); err != nil {
				return
			}
		}
		if len(recs) == tailBatch {
			continue
		}
		select {
		case <-changed:
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Service) handlePatterns(w http.ResponseWriter, r *http.Request) {
	limit, err := parseUintParam(r, "limit", defaultLimit, maxLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	sortBy := r.URL.Query().Get("sort")
	switch sortBy {
	case "", "count", "recent", "new":
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("sort=%q: want count, recent or new", sortBy))
		return
	}
	s.mu.Lock()
	s.prune()
	pats := s.miner.Patterns()
	out := make([]Pattern, len(pats))
	for i, p := range pats {
		out[i] = Pattern{ID: p.ID, Template: p.Template, Count: p.Count, FirstSeen: p.FirstSeen,
			LastSeen: p.LastSeen, Examples: p.Examples}
		if ps := s.stats[p.ID]; ps != nil {
			out[i].Hosts = slices.Clone(ps.Hosts)
			out[i].HostsOverflow = ps.HostsOverflow
			out[i].PerMinute = ps.Minutes.clone()
			out[i].PerHour = ps.Hours.clone()
		}
	}
	s.mu.Unlock()
	// Bring the windows up to now, so that clients see zeros for quiet time.
	now := time.Now()
	for i := range out {
		out[i].PerMinute.advanceTo(now)
		out[i].PerHour.advanceTo(now)
	}
	switch sortBy {
	case "", "count":
		slices.SortStableFunc(out, func(a, b Pattern) int { return cmpDesc(a.Count, b.Count) })
	case "recent":
		slices.SortStableFunc(out, func(a, b Pattern) int { return b.LastSeen.Compare(a.LastSeen) })
	case "new":
		slices.SortStableFunc(out, func(a, b Pattern) int { return b.FirstSeen.Compare(a.FirstSeen) })
	}
	resp := PatternsResponse{Total: len(out), Patterns: out[:min(len(out), int(limit))]}
	writeJSON(w, resp)
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func (s *Service) handleEvents(w http.ResponseWriter, r *http.Request) {
	var from time.Time
	if d := r.URL.Query().Get("since"); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil || dur <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("since=%q: want a positive duration such as 15m or 2h", d))
			return
		}
		from = time.Now().Add(-dur)
	}
	s.mu.Lock()
	var out []Event
	for i := len(s.events.events) - 1; i >= 0; i-- {
		e := s.events.events[i]
		if e.Time.Before(from) {
			break
		}
		out = append(out, e)
	}
	s.mu.Unlock()
	if out == nil {
		out = []Event{}
	}
	writeJSON(w, EventsResponse{Events: out})
}
