package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/jobs/report"
)

// summaryQueue bounds the ended jobs waiting for their summary; beyond it a
// job keeps no summary (its report works while its raw data lasts).
const summaryQueue = 4096

// summarizer computes the report figures of each job the nodes report
// ended and stores them in the index, so the report outlives the raw
// samples. It runs on its own goroutine: a 1,000-node job's figures take
// seconds of queries, which must not hold up the job index's sweeps.
type summarizer struct {
	q     report.Querier
	jobs  *jobs.Manager
	log   *slog.Logger
	queue chan string
	// settle is how long after a job's end its figures are computed, so
	// the nodes' last ticks are stored.
	settle time.Duration
}

func newSummarizer(q report.Querier, log *slog.Logger) *summarizer {
	s := &summarizer{q: q, log: log, queue: make(chan string, summaryQueue), settle: 5 * time.Second}
	return s
}

// ended is jobs.Options.OnEnd: it queues the job and never blocks.
func (s *summarizer) ended(j *jobs.Job) {
	select {
	case s.queue <- j.ID:
	default:
		s.log.Warn("job summary queue full: job keeps no summary", "job", j.ID)
	}
}

func (s *summarizer) run(ctx context.Context) {
	for {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-s.queue:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.settle):
		}
		if err := s.summarize(ctx, id); err != nil && ctx.Err() == nil {
			s.log.Warn("job summary failed", "job", id, "err", err)
		}
	}
}

func (s *summarizer) summarize(ctx context.Context, id string) error {
	j, err := s.jobs.Index().Get(id)
	if err != nil || j == nil {
		return err
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r, err := report.Build(qctx, s.q, *j, time.Now())
	if err != nil {
		return err
	}
	if r.Source != "store" {
		return nil // nothing measured: keep what the index has
	}
	sum := r.Summary
	return s.jobs.SetSummary(id, &sum)
}
