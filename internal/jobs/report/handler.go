package report

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/query"
)

// maxIDLen bounds a job id taken from a URL.
const maxIDLen = 64

// Handler serves GET /api/v1/jobs/{id}/report: mount it on a pattern with
// an {id} wildcard. An unknown job is 404 not_found, a query failure 500
// internal, both in the Prometheus API's error envelope.
func Handler(getJob func(id string) (jobs.Job, bool), q Querier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if id == "" || len(id) > maxIDLen || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
			writeError(w, http.StatusBadRequest, "bad_data", fmt.Sprintf("job id %.64q: want up to %d printable characters", id, maxIDLen))
			return
		}
		job, ok := getJob(id)
		if !ok {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no such job %q", id))
			return
		}
		rep, err := Build(r.Context(), q, job, time.Now())
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		b, err := json.Marshal(struct {
			Status string  `json:"status"`
			Data   *Report `json:"data"`
		}{"success", rep})
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]string{"status": "error", "errorType": typ, "error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// APIQuerier runs a report's queries through the server's query API, with
// its limits and lanes. Watermark, when set, is the store's
// Rollup.Watermark: the report then reads long jobs from the rollups (the
// API must serve the rollup Queryable, as the server's does).
type APIQuerier struct {
	API       *query.API
	Watermark func() time.Time
	// Files, when set, reads the per-file I/O record store (the top
	// files of the report's I/O section).
	Files func(ctx context.Context, id string, start, end time.Time, limit int) (*IOFiles, error)
}

// RollupWatermark is the end of the rolled-up time, zero without rollups.
func (a APIQuerier) RollupWatermark() time.Time {
	if a.Watermark == nil {
		return time.Time{}
	}
	return a.Watermark()
}

// Range evaluates qs; the answer is copied out of the engine's pools.
func (a APIQuerier) Range(ctx context.Context, qs string, start, end time.Time, step time.Duration) (promql.Matrix, error) {
	res, done, err := a.API.Range(ctx, qs, start, end, step)
	if err != nil {
		return nil, err
	}
	defer done()
	if res.Err != nil {
		return nil, res.Err
	}
	m, err := res.Matrix()
	if err != nil {
		return nil, err
	}
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric.Copy(), Floats: append([]promql.FPoint(nil), s.Floats...)}
	}
	return out, nil
}
