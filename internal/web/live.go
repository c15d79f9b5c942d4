package web

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// The live endpoint: GET /api/web/live?expr=PROMQL[&step=DURATION]
//
// Each stream evaluates expr for every node on its own ticker and sends
// Server-Sent Events:
//
//	nodes       {"nodes":[{"name":..,"group":..},..]}: the node order of the
//	            following frames; sent first and whenever the set changes
//	frame       see AppendFrameEvent; one code per node (Quantise)
//	queryerror  {"error":"..","fatal":bool}; after a fatal one the server
//	            ends the stream and the client must not reconnect
//
// A failure is fatal when it wraps ErrBadQuery or happens before the first
// frame (an expression that never worked); later storage errors are reported
// and the stream goes on.

const (
	maxExprLen = 4096
	maxStep    = 5 * time.Minute
)

func (h *Handler) serveLive(w http.ResponseWriter, r *http.Request) {
	expr := r.URL.Query().Get("expr")
	if expr == "" {
		http.Error(w, "live: missing expr parameter", http.StatusBadRequest)
		return
	}
	if len(expr) > maxExprLen {
		http.Error(w, "live: expr longer than "+strconv.Itoa(maxExprLen)+" bytes", http.StatusBadRequest)
		return
	}
	step, err := parseStep(r.URL.Query().Get("step"), h.interval)
	if err != nil {
		http.Error(w, "live: "+err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		h.rejected.Add(1)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "live: too many streams (limit "+strconv.Itoa(cap(h.slots))+")", http.StatusServiceUnavailable)
		return
	}
	h.active.Add(1)
	defer h.active.Add(-1)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // keep reverse proxies from buffering
	w.WriteHeader(http.StatusOK)

	s := &stream{h: h, w: w, rc: http.NewResponseController(w), expr: expr, step: step}
	s.buf = append(s.buf, "retry: 3000\n\n"...)
	if err := s.flush(); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			// A wrapping ResponseWriter without Unwrap: SSE cannot work.
			h.log.Warn("live stream needs a flushable response writer", "err", err)
		}
		return
	}
	h.log.Debug("live stream start", "expr", expr, "step", step)
	err = s.run(r.Context())
	h.log.Debug("live stream end", "expr", expr, "frames", s.sent, "err", err)
}

func parseStep(s string, minStep time.Duration) (time.Duration, error) {
	if s == "" {
		return minStep, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, err2 := strconv.ParseFloat(s, 64)
		if err2 != nil || secs != secs {
			return 0, errors.New("bad step " + strconv.Quote(s) + ": want a duration like 2s")
		}
		d = time.Duration(secs * float64(time.Second))
	}
	return min(max(d, minStep), maxStep), nil
}

// stream is the state of one live connection. buf, q and nodes are owned by
// the stream and reused every tick.
type stream struct {
	h    *Handler
	w    http.ResponseWriter
	rc   *http.ResponseController
	expr string
	step time.Duration

	nodes []NodeInfo // order of the last nodes event
	q     []byte
	buf   []byte
	sent  int64
}

func (s *stream) run(ctx context.Context) error {
	t := time.NewTicker(s.step)
	defer t.Stop()
	for {
		fatal, err := s.tick(ctx, time.Now())
		if err != nil || fatal {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tick sends one frame (and a nodes event first if the set changed). It
// returns fatal when the stream must end, err only for a broken connection.
func (s *stream) tick(ctx context.Context, now time.Time) (fatal bool, err error) {
	nodes, err := s.h.src.Nodes(ctx)
	if err != nil {
		return s.fail(ctx, "list nodes: "+err.Error(), s.sent == 0)
	}
	vals, err := s.h.src.NodeValues(ctx, s.expr, now)
	if err != nil {
		return s.fail(ctx, err.Error(), s.sent == 0 || errors.Is(err, ErrBadQuery))
	}
	sortNodes(nodes)
	s.buf = s.buf[:0]
	if !sameNames(nodes, s.nodes) {
		s.nodes = append(s.nodes[:0], nodes...)
		s.buf = appendJSONEvent(s.buf, "nodes", nodesEvent(s.nodes))
		s.h.nodeLists.Add(1)
	} else {
		// Same names; take the fresh up state.
		copy(s.nodes, nodes)
	}
	if cap(s.q) < len(s.nodes) {
		s.q = make([]byte, len(s.nodes))
	}
	s.q = s.q[:len(s.nodes)]
	lo, hi := Quantise(s.q, s.nodes, vals)
	start := len(s.buf)
	s.buf = AppendFrameEvent(s.buf, now, lo, hi, s.q)
	s.h.frames.Add(1)
	s.h.frameBytes.Add(int64(len(s.buf) - start))
	s.sent++
	return false, s.flush()
}

func (s *stream) fail(ctx context.Context, msg string, fatal bool) (bool, error) {
	if ctx.Err() != nil {
		return true, nil // client went away mid-query
	}
	s.h.errs.Add(1)
	s.buf = appendJSONEvent(s.buf[:0], "queryerror", struct {
		Error string `json:"error"`
		Fatal bool   `json:"fatal"`
	}{msg, fatal})
	return fatal, s.flush()
}

// flush writes buf with a deadline, so a stalled client cannot hold a slot
// forever even when the server sets no write timeout.
func (s *stream) flush() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.step + 10*time.Second))
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

func sameNames(a, b []NodeInfo) bool {
	return slices.EqualFunc(a, b, func(x, y NodeInfo) bool { return x.Name == y.Name && x.Group == y.Group })
}

type nodeEntry struct {
	Name  string `json:"name"`
	Group string `json:"group,omitempty"`
}

func nodesEvent(nodes []NodeInfo) any {
	l := make([]nodeEntry, len(nodes))
	for i, n := range nodes {
		l[i] = nodeEntry{n.Name, n.Group}
	}
	return struct {
		Nodes []nodeEntry `json:"nodes"`
	}{l}
}
