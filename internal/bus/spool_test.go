package bus

import (
	"encoding/json"
	"strings"

	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logstore"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// drainSpool reads and acknowledges everything waiting, returning the bodies.
func drainSpool(t *testing.T, s *spool) []string {
	t.Helper()
	var got []string
	p := s.start()
	for {
		r, err := s.next(p)
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%d/%s/%s", r.stream, r.seq, r.key, r.body))
		s.acked(r.next)
		p = r.next
	}
}

func TestSpoolOrderReopenAndSeq(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.append(StreamLogs, "logs.info.a", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.append(StreamEvents, "events.gap.n1", []byte("e"))
	// Acknowledge two, then reopen: the other four come back, in order.
	p := s.start()
	for range 2 {
		r, err := s.next(p)
		if err != nil {
			t.Fatal(err)
		}
		s.acked(r.next)
		p = r.next
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s, err = openSpool(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.waiting(); n != 4 {
		t.Errorf("waiting after reopen = %d, want 4", n)
	}
	// Sequence numbers go on where they were.
	if seq, _ := s.append(StreamLogs, "logs.info.a", []byte("5")); seq != 6 {
		t.Errorf("next logs seq after reopen = %d, want 6", seq)
	}
	got := fmt.Sprint(drainSpool(t, s))
	want := "[logs/3/logs.info.a/2 logs/4/logs.info.a/3 logs/5/logs.info.a/4 events/1/events.gap.n1/e logs/6/logs.info.a/5]"
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	s.close()
}

func TestSpoolBoundDropsOldest(t *testing.T) {
	dropped := 0
	s, err := openSpool(t.TempDir(), 64<<10, func(stream string, n int) { dropped += n })
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	body := make([]byte, 1000)
	const n = 200 // about 200 KB into 64 KiB
	for i := range n {
		if _, err := s.append(StreamLogs, "logs.info.a", body); err != nil {
			t.Fatal(i, err)
		}
	}
	waiting, bytes := s.waiting()
	if bytes > 64<<10 {
		t.Errorf("spool holds %d bytes, bound 65536", bytes)
	}
	if dropped+waiting != n || dropped == 0 {
		t.Errorf("dropped %d + waiting %d, want %d in all and some dropped", dropped, waiting, n)
	}
	got := drainSpool(t, s)
	if len(got) != waiting {
		t.Fatalf("read %d, waiting said %d", len(got), waiting)
	}
	// What is left is the newest, in order, without holes.
	var first int
	fmt.Sscanf(got[0], "logs/%d/", &first)
	if first != dropped+1 {
		t.Errorf("first kept seq %d, want %d", first, dropped+1)
	}
}

func TestSpoolTornTail(t *testing.T) {
	dir := t.TempDir()
	s, _ := openSpool(dir, 1<<20, nil)
	s.append(StreamLogs, "k", []byte("one"))
	s.append(StreamLogs, "k", []byte("two"))
	seg := s.segs[0]
	// A crash mid-write: half a record at the end.
	seg.f.WriteAt([]byte{50, 0, 0, 0, 1, 2}, seg.size)
	s.close()
	s, err := openSpool(dir, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if got := fmt.Sprint(drainSpool(t, s)); got != "[logs/1/k/one logs/2/k/two]" {
		t.Errorf("after torn tail: %s", got)
	}
	if seq, _ := s.append(StreamLogs, "k", nil); seq != 3 {
		t.Errorf("seq %d, want 3", seq)
	}
}

func TestMetricsRoundTrip(t *testing.T) {
	d1 := metric.NewDesc("node_load1", "", metric.Gauge)
	d2 := metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", "0", "mode", "idle")
	series := []string{seriesText(d1), seriesText(d2)}
	types := []metric.Type{d1.Type, d2.Type}
	tm := time.UnixMilli(1700000000123)
	for _, with := range []bool{true, false} {
		b := appendMetrics([]byte("x"), tm, schemaID(series), []float64{0.5, 1234.25}, types, series, with)
		m, err := DecodeMetrics(b[1:])
		if err != nil {
			t.Fatal(err)
		}
		if !m.Time.Equal(tm) || m.SchemaID != schemaID(series) || fmt.Sprint(m.Values) != "[0.5 1234.25]" {
			t.Errorf("decoded %+v", m)
		}
		if with && fmt.Sprint(m.Series) != `[node_load1 node_cpu_seconds_total{cpu="0",mode="idle"}]` {
			t.Errorf("schema %q", m.Series)
		}
		if !with && m.Series != nil {
			t.Error("schema without the flag")
		}
		if with {
			continue
		}
		if got := len(b) - 1; got != metricsHeader+16 {
			t.Errorf("%d bytes for 2 values", got)
		}
	}
	for _, bad := range [][]byte{nil, []byte("VGM1"), append([]byte("VGM1\x00"), make([]byte, 20)...)[:24]} {
		if _, err := DecodeMetrics(bad); err == nil {
			t.Errorf("DecodeMetrics(%q) accepted", bad)
		}
	}
}

func TestKeyWord(t *testing.T) {
	for in, want := range map[string]string{"": "-", "cn1.cluster": "cn1_cluster", "a#*b": "a__b", "sshd": "sshd"} {
		if got := keyWord(in); got != want {
			t.Errorf("keyWord(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzDecodeMetrics(f *testing.F) {
	d := metric.NewDesc("x", "", metric.Gauge, "a", "b")
	s := []string{seriesText(d)}
	f.Add(appendMetrics(nil, time.Unix(1, 0), 1, []float64{1}, []metric.Type{0}, s, true))
	f.Add(appendMetrics(nil, time.Unix(1, 0), 1, []float64{1, 2}, nil, nil, false))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMetrics(b)
		if err == nil && len(m.Values)*8 > len(b) {
			t.Fatalf("%d values from %d bytes", len(m.Values), len(b))
		}
	})
}

func FuzzParseRecord(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 'k', 'b'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err == nil && len(r.key)+len(r.body)+10 != len(b) {
			t.Fatalf("record %+v from %d bytes", r, len(b))
		}
	})
}

// Logs cuts batches at 1000 messages and about 1 MiB, by severity and app.
func TestLogsBatches(t *testing.T) {
	s, err := openSpool(t.TempDir(), 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	b := &Bus{m: newMetrics(nil), spool: s}
	big := strings.Repeat("x", 60000)
	var recs []logstore.Record
	for i := range 2500 {
		recs = append(recs, logstore.Record{Seq: uint64(i + 1), Host: "h", App: "a", Severity: 3, Text: "t"})
	}
	for range 40 {
		recs = append(recs, logstore.Record{Host: "h", App: "b.c", Severity: 6, Text: big})
	}
	b.Logs(recs)
	var keys []string
	p := s.start()
	for {
		r, err := s.next(p)
		if err != nil {
			break
		}
		var lb LogBatch
		if err := json.Unmarshal(r.body, &lb); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, fmt.Sprintf("%s:%d", r.key, len(lb.Messages)))
		p = r.next
	}
	want := "[logs.err.a:1000 logs.err.a:1000 logs.err.a:500 logs.info.b_c:18 logs.info.b_c:18 logs.info.b_c:4]"
	if fmt.Sprint(keys) != want {
		t.Errorf("batches %v, want %s", keys, want)
	}
}
