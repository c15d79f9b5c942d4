package jobs

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

// Register serves the job API on mux (docs/jobs.md):
//
//	GET /api/v1/jobs?user=&state=&partition=&since=&limit=
//	GET /api/v1/jobs/{id}
//	POST /api/v1/jobs/{id}/event (vigil job-event, from Slurm's prolog and epilog)
func (m *Manager) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/jobs", m.serveList)
	mux.HandleFunc("GET /api/v1/jobs/{id}", m.serveGet)
	mux.HandleFunc("POST /api/v1/jobs/{id}/event", m.serveEvent)
}

// serveEvent takes a prolog's or epilog's word on a job: form fields
// event (start or end), user, account, partition, name, nodes (a Slurm
// host list), time (Unix seconds; default now), cpus, gpus, mem_bytes
// (requested, whole job), time_limit (seconds), exit_code ("N" or
// "N:SIGNAL", end only) and state (a final state word, end only: it says
// more than an exit code, e.g. timeout or oom).
func (m *Manager) serveEvent(w http.ResponseWriter, r *http.Request) {
	if !m.events {
		WriteError(w, http.StatusNotFound, "unavailable", "job events are off: start vigil server with --job-events")
		return
	}
	id := r.PathValue("id")
	if !ValidID(id) {
		WriteError(w, http.StatusBadRequest, "bad_data", fmt.Sprintf("job id %.70q: want digits, optionally _TASK", id))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		WriteError(w, http.StatusBadRequest, "bad_data", err.Error())
		return
	}
	ev, err := parseEvent(id, r.PostForm, time.Now())
	if err != nil {
		WriteError(w, http.StatusBadRequest, "bad_data", err.Error())
		return
	}
	j, err := m.Update(id, ev.apply)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	WriteData(w, j)
}

func parseEvent(id string, f url.Values, now time.Time) (*slurmJob, error) {
	for k, v := range f {
		if len(v) != 1 || len(v[0]) > 4096 {
			return nil, fmt.Errorf("%s: want one value of at most 4096 bytes", k)
		}
	}
	s := &slurmJob{ID: id, fromHook: true, User: f.Get("user"), Account: f.Get("account"), Partition: f.Get("partition"), Name: f.Get("name")}
	if n := f.Get("nodes"); n != "" {
		nodes, err := expandHostlist(n, MaxNodes)
		if err != nil {
			return nil, fmt.Errorf("nodes: %w", err)
		}
		s.Nodes = nodes
	}
	for _, n := range []struct {
		name string
		max  int64
		set  func(int64)
	}{
		{"cpus", 1 << 24, func(v int64) { s.CPUs = int(v) }},
		{"gpus", 1 << 20, func(v int64) { s.GPUs = int(v) }},
		{"mem_bytes", 1 << 62, func(v int64) { s.MemBytes = v }},
		{"time_limit", 1e9, func(v int64) { s.TimeLimit = time.Duration(v) * time.Second }},
	} {
		v := f.Get(n.name)
		if v == "" {
			continue
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil || x < 0 || x > n.max {
			return nil, fmt.Errorf("%s: %q: want an integer in 0..%d", n.name, v, n.max)
		}
		n.set(x)
	}
	at := now
	if v := f.Get("time"); v != "" {
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || sec <= 0 || sec > 1e11 {
			return nil, fmt.Errorf("time: %q: want Unix seconds", v)
		}
		at = time.Unix(0, int64(sec*1e9)).UTC()
	}
	switch f.Get("event") {
	case "start":
		s.State, s.Start = StateRunning, at
	case "end":
		s.End, s.State = at, StateEnded
		if v := f.Get("exit_code"); v != "" {
			code, sig, _ := strings.Cut(v, ":")
			n, err := strconv.Atoi(code)
			if err != nil || n < 0 || n > 255 {
				return nil, fmt.Errorf("exit_code: %q: want N or N:SIGNAL", v)
			}
			s.ExitCode, s.HasExit = n, true
			s.State = StateCompleted
			if n != 0 || (sig != "" && sig != "0") {
				s.State = StateFailed
			}
		}
		if v := f.Get("state"); v != "" {
			st := State(v)
			switch st {
			case StateCompleted, StateFailed, StateCancelled, StateTimeout, StateOOM, StateNodeFail:
				s.State = st
			default:
				return nil, fmt.Errorf("state: %.40q: want completed, failed, cancelled, timeout, oom or node_fail", v)
			}
		}
	default:
		return nil, fmt.Errorf("event: %q: want start or end", f.Get("event"))
	}
	return s, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(apiError{Status: "error", ErrorType: "internal", Error: err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

type apiError struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
}

type apiOK struct {
	Status string `json:"status"`
	Data   any    `json:"data"`
}

// WriteError answers a Prometheus-style error.
func WriteError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, apiError{Status: "error", ErrorType: typ, Error: msg})
}

// WriteData answers {"status":"success","data":v}.
func WriteData(w http.ResponseWriter, v any) {
	writeJSON(w, http.StatusOK, apiOK{Status: "success", Data: v})
}

// ParseFilter reads a list request's parameters, bounded.
func ParseFilter(r *http.Request, now time.Time) (Filter, error) {
	q := r.URL.Query()
	var f Filter
	for _, p := range []struct {
		name string
		dst  *string
	}{{"user", &f.User}, {"partition", &f.Partition}, {"node", &f.Node}} {
		v := q.Get(p.name)
		if len(v) > MaxStringLen {
			return f, fmt.Errorf("%s: longer than %d bytes", p.name, MaxStringLen)
		}
		*p.dst = v
	}
	st := q.Get("state")
	if len(st) > 32 {
		return f, fmt.Errorf("state: longer than 32 bytes")
	}
	f.State = State(st)
	if s := q.Get("since"); s != "" {
		d, err := duration.Parse(s)
		if err != nil {
			return f, fmt.Errorf("since: %w", err)
		}
		if d > 0 {
			f.Since = now.Add(-d)
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return f, fmt.Errorf("limit: %q: want 1 to %d", s, MaxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

func (m *Manager) serveList(w http.ResponseWriter, r *http.Request) {
	f, err := ParseFilter(r, time.Now())
	if err != nil {
		WriteError(w, http.StatusBadRequest, "bad_data", err.Error())
		return
	}
	js, err := m.idx.List(f)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	WriteData(w, js)
}

func (m *Manager) serveGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !ValidID(id) {
		WriteError(w, http.StatusBadRequest, "bad_data", fmt.Sprintf("job id %.70q: want digits, optionally _TASK", id))
		return
	}
	j, err := m.idx.Get(id)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	if j == nil {
		WriteError(w, http.StatusNotFound, "not_found", "no such job: "+id)
		return
	}
	WriteData(w, j)
}
