package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/remotewrite"
	"github.com/vigil-hpc/vigil/internal/store"
)

// Limits of one remote-write request. Prometheus sends at most a few MiB
// per request (max_samples_per_send 2000 by default); the bounds keep a
// hostile body from exhausting memory.
const (
	maxWriteBody    = 32 << 20
	maxWriteDecoded = 128 << 20
)

// RemoteWrite ingests Prometheus remote-write 1.0 requests (snappy
// compressed prompb.WriteRequest) into the store.
type RemoteWrite struct {
	store *store.Store
	log   *slog.Logger
	// forward, if set, gets what the store accepted (remote write out).
	forward *remotewrite.Writer

	samples, rejected, refused atomic.Uint64
}

// register exposes the receiver's counters on reg.
func (rw *RemoteWrite) register(reg prometheus.Registerer) {
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	reg.MustRegister(
		counter("vigil_remote_write_samples_received_total", "Samples stored from remote-write requests.", &rw.samples),
		counter("vigil_remote_write_samples_rejected_total", "Remote-write series or samples rejected (invalid labels, out of order, duplicates).", &rw.rejected),
		counter("vigil_remote_write_requests_refused_total", "Remote-write requests refused because the receiver is off (--enable-remote-write-receiver).", &rw.refused),
	)
}

// disabled answers POST /api/v1/write while the receiver is off, naming
// the flag that turns it on: anyone reaching the API could otherwise
// store forged series.
func (rw *RemoteWrite) disabled(w http.ResponseWriter, _ *http.Request) {
	if rw.refused.Add(1) == 1 {
		rw.log.Warn("remote-write request refused: the receiver is off (start vigil server with --enable-remote-write-receiver)")
	}
	http.Error(w, "remote write receiver is disabled: start vigil server with --enable-remote-write-receiver", http.StatusNotFound)
}

// NewRemoteWrite returns the handler for POST /api/v1/write.
func NewRemoteWrite(s *store.Store, log *slog.Logger) *RemoteWrite {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RemoteWrite{store: s, log: log}
}

// httpError carries the status to answer with.
type httpError struct {
	code int
	err  error
}

func (e *httpError) Error() string { return e.err.Error() }

func (rw *RemoteWrite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := rw.serve(r)
	if err == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	code := http.StatusInternalServerError
	var he *httpError
	if errors.As(err, &he) {
		code = he.code
	}
	switch {
	case errors.Is(err, store.ErrNotWritable):
		// Retryable: the sender keeps the samples. The store logs why.
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "10")
		rw.log.Debug("remote write refused: store not writable", "err", err)
	case code >= 500:
		rw.log.Error("remote write", "err", err)
	default:
		rw.log.Debug("remote write rejected", "err", err)
	}
	http.Error(w, err.Error(), code)
}

func (rw *RemoteWrite) serve(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-protobuf" {
			return &httpError{http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: want application/x-protobuf", ct)}
		}
		if p := params["proto"]; p != "" && p != "prometheus.WriteRequest" {
			return &httpError{http.StatusUnsupportedMediaType, fmt.Errorf("remote-write message %q not supported: only prometheus.WriteRequest (1.0)", p)}
		}
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "snappy") {
		return &httpError{http.StatusUnsupportedMediaType, fmt.Errorf("content encoding %q: want snappy", enc)}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWriteBody+1))
	if err != nil {
		return &httpError{http.StatusBadRequest, fmt.Errorf("read body: %w", err)}
	}
	if len(body) > maxWriteBody {
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Errorf("body larger than %d bytes", maxWriteBody)}
	}
	var req prompb.WriteRequest
	if err := decodeWriteRequest(body, &req); err != nil {
		return &httpError{http.StatusBadRequest, err}
	}
	return rw.append(r, &req)
}

// decodeWriteRequest un-snappies and unmarshals a request body.
func decodeWriteRequest(body []byte, req *prompb.WriteRequest) error {
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	if n > maxWriteDecoded {
		return fmt.Errorf("decoded body of %d bytes exceeds %d", n, maxWriteDecoded)
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	if err := req.Unmarshal(raw); err != nil {
		return fmt.Errorf("decode WriteRequest: %w", err)
	}
	return nil
}

var metadataTypes = map[prompb.MetricMetadata_MetricType]model.MetricType{
	prompb.MetricMetadata_COUNTER:        model.MetricTypeCounter,
	prompb.MetricMetadata_GAUGE:          model.MetricTypeGauge,
	prompb.MetricMetadata_HISTOGRAM:      model.MetricTypeHistogram,
	prompb.MetricMetadata_GAUGEHISTOGRAM: model.MetricTypeGaugeHistogram,
	prompb.MetricMetadata_SUMMARY:        model.MetricTypeSummary,
	prompb.MetricMetadata_INFO:           model.MetricTypeInfo,
	prompb.MetricMetadata_STATESET:       model.MetricTypeStateset,
}

// append stores every valid series. Invalid label sets and refused samples
// (out of order, duplicates) make the answer 400 so the sender drops them
// instead of retrying, as Prometheus' own receiver does; the valid rest is
// committed.
func (rw *RemoteWrite) append(r *http.Request, req *prompb.WriteRequest) error {
	app := rw.store.Appender(r.Context())
	var (
		b        labels.ScratchBuilder
		firstBad error
		bad      int
		stored   int
		forward  []remotewrite.Labeled
	)
	reject := func(err error) {
		bad++
		if firstBad == nil {
			firstBad = err
		}
	}
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		b.Reset()
		for _, l := range ts.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		lset := b.Labels()
		if err := validLabels(lset); err != nil {
			reject(fmt.Errorf("series %s: %w", lset, err))
			continue
		}
		if len(ts.Histograms) > 0 {
			reject(fmt.Errorf("series %s: native histograms are not supported", lset))
		}
		if err := rw.store.AdmitSeries(app, store.PathRemoteWrite, remoteSender(r), lset); err != nil {
			reject(fmt.Errorf("series %s: %w", lset, err))
			continue
		}
		var ref storage.SeriesRef
		fwd := remotewrite.Labeled{Labels: lset}
		for _, s := range ts.Samples {
			nr, err := app.Append(ref, lset, s.Timestamp, s.Value)
			switch {
			case err == nil:
				ref = nr
				stored++
				if rw.forward != nil {
					fwd.T, fwd.V = append(fwd.T, s.Timestamp), append(fwd.V, s.Value)
				}
			case store.SampleRejected(err): // too far ahead, out of order, too old, duplicate
				reject(fmt.Errorf("series %s at %d: %w", lset, s.Timestamp, err))
			default:
				_ = app.Rollback()
				return fmt.Errorf("append %s: %w", lset, err)
			}
		}
		if len(fwd.T) > 0 {
			forward = append(forward, fwd)
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if rw.forward != nil {
		rw.forward.AddLabeled(forward)
	}
	for _, md := range req.Metadata {
		if md.MetricFamilyName == "" {
			continue
		}
		typ, ok := metadataTypes[md.Type]
		if !ok {
			typ = model.MetricTypeUnknown
		}
		rw.store.SetMetadata(md.MetricFamilyName, store.Metadata{Type: string(typ), Help: md.Help, Unit: md.Unit})
	}
	rw.samples.Add(uint64(stored))
	if bad > 0 {
		rw.rejected.Add(uint64(bad))
		return &httpError{http.StatusBadRequest, fmt.Errorf("%d series or samples rejected, first: %w", bad, firstBad)}
	}
	return nil
}

// validLabels checks what the TSDB would otherwise accept silently or
// refuse with a less clear error.
func validLabels(ls labels.Labels) error {
	if ls.Get(labels.MetricName) == "" {
		return errors.New("no metric name")
	}
	if dup, ok := ls.HasDuplicateLabelNames(); ok {
		return fmt.Errorf("duplicate label %q", dup)
	}
	var err error
	ls.Range(func(l labels.Label) {
		switch {
		case err != nil:
		case !model.UTF8Validation.IsValidLabelName(l.Name) || !model.LabelValue(l.Value).IsValid():
			err = fmt.Errorf("invalid label %q=%q", l.Name, l.Value)
		case l.Name == store.UnscaledLabel:
			err = fmt.Errorf("label %q is reserved for the store", l.Name)
		}
	})
	return err
}

// Stats returns samples stored and samples or series rejected.
func (rw *RemoteWrite) Stats() (stored, rejected uint64) {
	return rw.samples.Load(), rw.rejected.Load()
}
