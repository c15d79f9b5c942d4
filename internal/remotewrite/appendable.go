package remotewrite

import (
	"context"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// Appendable returns an Appendable whose appenders write to next and, once
// a commit succeeds, queue the samples it took for the destinations: the
// series the server writes itself (its own metrics, the log pattern
// counters, recording rules and ALERTS) reach them as the tree's do. With
// no destination it is next.
func (w *Writer) Appendable(next storage.Appendable) storage.Appendable {
	if len(w.queues) == 0 {
		return next
	}
	return appendable{next: next, w: w}
}

type appendable struct {
	next storage.Appendable
	w    *Writer
}

func (a appendable) Appender(ctx context.Context) storage.Appender {
	return &teeAppender{Appender: a.next.Appender(ctx), w: a.w}
}

// teeAppender passes everything to the embedded Appender and remembers
// the float samples it accepted. Native histograms and exemplars are not
// forwarded (remote write 1.0 as this package encodes it has neither);
// stale markers are not either, as for the tree's ticks.
type teeAppender struct {
	storage.Appender
	w       *Writer
	samples []Labeled
}

// maxTeeSamples bounds what one appender remembers; a commit larger than
// this (none of the server's writers makes one) forwards its first part.
const maxTeeSamples = 1 << 20

func (t *teeAppender) Append(ref storage.SeriesRef, l labels.Labels, ts int64, v float64) (storage.SeriesRef, error) {
	ref, err := t.Appender.Append(ref, l, ts, v)
	if err == nil && !value.IsStaleNaN(v) && len(t.samples) < maxTeeSamples {
		t.samples = append(t.samples, Labeled{Labels: l, T: []int64{ts}, V: []float64{v}})
	}
	return ref, err
}

func (t *teeAppender) Commit() error {
	if err := t.Appender.Commit(); err != nil {
		return err
	}
	t.w.AddLabeled(t.samples)
	t.samples = nil
	return nil
}

func (t *teeAppender) Rollback() error {
	t.samples = nil
	return t.Appender.Rollback()
}
