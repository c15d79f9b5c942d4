package events

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
)

// Paths of the API (docs/events.md).
const (
	PathQuery  = "/api/v1/events"
	PathStream = "/api/v1/events/stream"
)

// QueryHandler serves GET /api/v1/events.
func (s *Store) QueryHandler() http.Handler { return http.HandlerFunc(s.serveQuery) }

// StreamHandler serves GET /api/v1/events/stream (server-sent events).
// It returns when the client goes, reads too slowly or the store closes;
// the server ends it at shutdown through the request's context.
func (s *Store) StreamHandler() http.Handler { return http.HandlerFunc(s.serveStream) }

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", typ, msg})
}

// maxParam bounds each query parameter's length.
const maxParam = 4096

// ParseFilter reads the filters of a request's query: since, until
// (RFC 3339, Unix seconds, or a duration meaning that long before now),
// kind and severity (comma lists), node (a glob), job, limit, before and
// after (IDs).
func ParseFilter(q url.Values, now time.Time) (Filter, error) {
	var f Filter
	for k, v := range q {
		if len(v) > 1 {
			return f, fmt.Errorf("%s: given %d times, want once", k, len(v))
		}
		if len(v[0]) > maxParam {
			return f, fmt.Errorf("%s: longer than %d bytes", k, maxParam)
		}
	}
	var err error
	if f.Since, err = parseTime(q.Get("since"), now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = parseTime(q.Get("until"), now); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	f.Kinds = splitList(q.Get("kind"))
	f.Severities = splitList(q.Get("severity"))
	f.Node, f.Job = q.Get("node"), q.Get("job")
	for _, p := range []struct {
		name string
		dst  *uint64
	}{{"before", &f.Before}, {"after", &f.After}} {
		if v := q.Get(p.name); v != "" {
			if *p.dst, err = strconv.ParseUint(v, 10, 64); err != nil {
				return f, fmt.Errorf("%s: %q is not an event ID", p.name, v)
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, fmt.Errorf("limit: %q, want 1 to %d", v, MaxLimit)
		}
		f.Limit = min(n, MaxLimit)
	}
	return f, f.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseTime reads Unix seconds, RFC 3339, or a duration before now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || f > 1e11 {
			return time.Time{}, fmt.Errorf("%q: Unix seconds out of range", s)
		}
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := duration.Parse(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339, Unix seconds or a duration such as 15m", s)
}

type queryAnswer struct {
	Status string    `json:"status"`
	Data   queryData `json:"data"`
}

type queryData struct {
	Events []Event `json:"events"`
	Next   string  `json:"next"`
}

func (s *Store) serveQuery(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r.URL.Query(), s.o.now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_data", err.Error())
		return
	}
	evs, next, err := s.Query(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	a := queryAnswer{Status: "success", Data: queryData{Events: evs}}
	if next != 0 {
		a.Data.Next = strconv.FormatUint(next, 10)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a)
}

// sub is one live stream's subscription.
type sub struct {
	ch chan Event // closed when dropped or the store closes
	f  Filter
}

// subQueue bounds the events waiting for one stream; a client that lets
// more pile up is dropped.
const subQueue = 1024

func (s *Store) subscribe(f Filter) *sub {
	sb := &sub{ch: make(chan Event, subQueue), f: f}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if s.closed.Load() {
		close(sb.ch)
		return sb
	}
	s.subs[sb] = struct{}{}
	return sb
}

func (s *Store) unsubscribe(sb *sub) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if _, ok := s.subs[sb]; ok {
		delete(s.subs, sb)
		close(sb.ch)
	}
}

// publish passes a stored event to the streams that want it, without
// waiting: a stream whose queue is full is dropped.
func (s *Store) publish(e *Event) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for sb := range s.subs {
		if !sb.f.Match(e) {
			continue
		}
		select {
		case sb.ch <- *e:
		default:
			delete(s.subs, sb)
			close(sb.ch)
			s.m.slowSubs.Inc()
		}
	}
}

// writeTimeout bounds one write to a stream's client.
const writeTimeout = 10 * time.Second

// maxReplay bounds the missed events one stream is sent before the live ones.
const maxReplay = MaxLimit

func (s *Store) serveStream(w http.ResponseWriter, r *http.Request) {
	if n := s.clients.Add(1); int(n) > s.o.MaxClients {
		s.clients.Add(-1)
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("too many event streams (at most %d)", s.o.MaxClients))
		return
	}
	defer s.clients.Add(-1)
	s.m.clients.Inc()
	defer s.m.clients.Dec()
	q := r.URL.Query()
	f, err := ParseFilter(q, s.o.now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_data", err.Error())
		return
	}
	// Replay from Last-Event-ID (an EventSource reconnecting, or the
	// last_event_id parameter) or from since; else live only.
	replay := false
	lastID := r.Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = q.Get("last_event_id")
	}
	if lastID != "" {
		if f.After, err = strconv.ParseUint(lastID, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, "bad_data", fmt.Sprintf("Last-Event-ID: %.40q is not an event ID", lastID))
			return
		}
		replay = true
	}
	replay = replay || !f.Since.IsZero()
	live := f
	live.Since = time.Time{} // since is where the replay starts, not a bound on live events
	sb := s.subscribe(live)
	defer s.unsubscribe(sb)

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf []byte
	send := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(s.o.writeTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send([]byte("retry: 2000\n\n")) {
		return
	}
	sent := f.After // the newest ID sent: live events up to it were replayed
	if replay {
		rf := f
		rf.Oldest, rf.Limit = true, maxReplay
		evs, _, err := s.Query(rf)
		if err != nil {
			return
		}
		for i := range evs {
			buf = appendSSE(buf[:0], &evs[i])
			if !send(buf) {
				return
			}
			sent = evs[i].ID
		}
	}
	keep := time.NewTicker(s.o.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			if !send([]byte(": keep-alive\n\n")) {
				return
			}
		case e, ok := <-sb.ch:
			if !ok {
				return // too slow, or the store closed
			}
			if replay && e.ID <= sent {
				continue
			}
			buf = appendSSE(buf[:0], &e)
			if !send(buf) {
				return
			}
		}
	}
}

// appendSSE appends one event in the text/event-stream format.
func appendSSE(b []byte, e *Event) []byte {
	j, _ := json.Marshal(e) // fields are plain strings: cannot fail
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, e.ID, 10)
	b = append(b, "\nevent: vigil\ndata: "...)
	b = append(b, j...) // JSON escapes newlines: one data line
	return append(b, "\n\n"...)
}
