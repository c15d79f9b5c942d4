package wire_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func ioRecord(i int) appio.FileRecord {
	r := appio.FileRecord{Start: 1_700_000_000e9 + int64(i)*1e9, JobID: "42", PID: uint32(1000 + i), UID: 1001, Rank: int32(i%4) - 1,
		Exe: "/usr/bin/dd", Path: fmt.Sprintf("/scratch/u/file-%d", i), MountPoint: "/scratch", FSType: "lustre"}
	r.End = r.Start + 1e9
	for k := range r.Counters {
		r.Counters[k] = uint64(i*37 + k)
	}
	r.Counters[appio.BytesWritten] = appio.MaxCounter
	return r
}

// decodeFrames reads every frame of b and decodes its records.
func decodeFrames(t *testing.T, b []byte) (frames int, recs []appio.FileRecord) {
	t.Helper()
	fr := wire.NewFrameReader(strings.NewReader(string(b)), wire.DefaultMaxFrame)
	for {
		typ, payload, err := fr.Next()
		if err != nil {
			return frames, recs
		}
		if typ != 20 {
			t.Fatalf("frame type %d", typ)
		}
		frames++
		var err2 error
		var node string
		node, recs, err2 = wire.DecodeIORecords(payload, recs)
		if err2 != nil {
			t.Fatal(err2)
		}
		if node != "cn1" {
			t.Fatalf("node %q", node)
		}
	}
}

// Records come back exactly, node set, split into frames of at most
// MaxIORecords; appending to a non-empty buffer keeps what was there.
func TestIORecordsRoundTrip(t *testing.T) {
	var in []appio.FileRecord
	for i := range 2500 {
		in = append(in, ioRecord(i))
	}
	prefix := wire.AppendFrame(nil, 5, nil)
	b := wire.AppendIORecords(append([]byte(nil), prefix...), "cn1", in)
	if string(b[:len(prefix)]) != string(prefix) {
		t.Fatal("prefix overwritten")
	}
	frames, out := decodeFrames(t, b[len(prefix):])
	if frames != 3 {
		t.Errorf("%d frames for 2,500 records, want 3", frames)
	}
	for i := range in {
		in[i].Node = "cn1"
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("records differ: got %d, first %+v, want %+v", len(out), out[0], in[0])
	}
}

// Long paths cut to the receiver's bound still decode; big records end a
// frame at about 256 KiB.
func TestIORecordsLongPaths(t *testing.T) {
	var in []appio.FileRecord
	for i := range 200 {
		r := ioRecord(i)
		r.Path = "/" + strings.Repeat("p", 10000)
		in = append(in, r)
	}
	frames, out := decodeFrames(t, wire.AppendIORecords(nil, "cn1", in))
	if len(out) != 200 || frames < 3 {
		t.Fatalf("%d records in %d frames", len(out), frames)
	}
	if len(out[0].Path) != wire.MaxIOPath {
		t.Errorf("path of %d bytes, want cut to %d", len(out[0].Path), wire.MaxIOPath)
	}
}

func TestIORecordsRefused(t *testing.T) {
	good := wire.AppendIORecords(nil, "cn1", []appio.FileRecord{ioRecord(1)})
	payload := good[6 : len(good)-4]
	if _, _, err := wire.DecodeIORecords(payload, nil); err != nil {
		t.Fatal(err)
	}
	// 1,024 records of the smallest size are a valid frame.
	var tiny []appio.FileRecord
	for range wire.MaxIORecords {
		tiny = append(tiny, appio.FileRecord{Start: 1, End: 1})
	}
	tb := wire.AppendIORecords(nil, "", tiny)
	if n, err := wire.CheckIORecords(tb[6 : len(tb)-4]); err != nil || n != wire.MaxIORecords {
		t.Errorf("1,024 smallest records: %d, %v", n, err)
	}
	for name, p := range map[string][]byte{
		"empty":         {},
		"no records":    {3, 'c', 'n', '1', 0},
		"count too big": append([]byte{3, 'c', 'n', '1', 0x81, 0x08}, payload[5:]...),
		"truncated":     payload[:len(payload)-1],
		"trailing":      append(append([]byte(nil), payload...), 0),
	} {
		if _, _, err := wire.DecodeIORecords(p, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := wire.CheckIORecords(p); err == nil {
			t.Errorf("%s: accepted by the relay's check", name)
		}
	}
	r := ioRecord(1)
	r.Counters[3] = appio.MaxCounter + 1 // the encoder clamps; forge it
	b := wire.AppendIORecords(nil, "cn1", []appio.FileRecord{r})
	if _, rec, err := wire.DecodeIORecords(b[6:len(b)-4], nil); err != nil || rec[0].Counters[3] != appio.MaxCounter {
		t.Errorf("clamped counter: %v %v", err, rec)
	}
	r = ioRecord(1)
	r.Start = -5
	b = wire.AppendIORecords(nil, "cn1", []appio.FileRecord{r})
	if _, _, err := wire.DecodeIORecords(b[6:len(b)-4], nil); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("negative start: %v", err)
	}
}

func FuzzDecodeIORecords(f *testing.F) {
	b := wire.AppendIORecords(nil, "cn1", []appio.FileRecord{ioRecord(1), ioRecord(2)})
	f.Add(b[6 : len(b)-4])
	f.Add([]byte{0, 1})
	f.Fuzz(func(t *testing.T, p []byte) {
		node, recs, err := wire.DecodeIORecords(p, nil)
		if n, cerr := wire.CheckIORecords(p); (cerr == nil) != (err == nil) || err == nil && n != len(recs) {
			t.Fatalf("check says %d, %v; decode %d, %v", n, cerr, len(recs), err)
		}
		if err != nil {
			return
		}
		// What was accepted encodes to what decodes the same.
		for i := range recs {
			recs[i].Node = ""
		}
		again := wire.AppendIORecords(nil, node, recs)
		_, recs2, err := wire.DecodeIORecords(again[6:len(again)-4], nil)
		if err != nil {
			t.Fatalf("re-encoded records refused: %v", err)
		}
		for i := range recs2 {
			recs2[i].Node = ""
		}
		if !reflect.DeepEqual(recs, recs2) {
			t.Fatal("records changed through a re-encoding")
		}
	})
}

// ioSink records what arrives; the first failN frames it refuses (as a
// store that cannot write), which ends the connection unacknowledged.
type ioSink struct {
	wire.NopHandler
	mu    sync.Mutex
	failN int
	got   []appio.FileRecord
	fails int
}

func (s *ioSink) IORecords(node string, recs []appio.FileRecord, _ []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails < s.failN {
		s.fails++
		return wire.ErrNotKept
	}
	s.got = append(s.got, recs...)
	return nil
}

func (s *ioSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func serveHandler(t *testing.T, h wire.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wire.Serve(ctx, ln, wire.ServerOptions{Log: slog.New(slog.DiscardHandler)}, h)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// A record frame the receiver did not keep is sent again on the next
// connection, so every record arrives exactly once.
func TestIORecordsResentUntilAcknowledged(t *testing.T) {
	sink := &ioSink{failN: 2}
	addr := serveHandler(t, sink)
	c := startClient(t, wire.ClientOptions{Addrs: []string{addr}, Name: "cn1"})
	var in []appio.FileRecord
	for i := range 1500 {
		in = append(in, ioRecord(i))
	}
	c.IORecords("cn1", in[:1000])
	c.IORecords("cn1", in[1000:])
	waitFor(t, "all records", func() bool { return sink.count() >= 1500 })
	time.Sleep(100 * time.Millisecond)
	if n := sink.count(); n != 1500 {
		t.Fatalf("%d records arrived, want 1500 once each", n)
	}
	seen := map[string]bool{}
	for _, r := range sink.got {
		if seen[r.Path] {
			t.Fatalf("%s twice", r.Path)
		}
		seen[r.Path] = true
	}
	if c.Stats().Connects.Load() < 3 {
		t.Errorf("%d connections, want 3 (two refused frames)", c.Stats().Connects.Load())
	}
	if d := c.Stats().DroppedIORecords.Load(); d != 0 {
		t.Errorf("%d records dropped", d)
	}
}

// With no upstream, records beyond a quarter of MaxQueueBytes drop the
// oldest, counted; the newest arrive once one comes up.
func TestIORecordsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "cn1", MaxQueueBytes: 1 << 20, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := range 100 {
		var batch []appio.FileRecord
		for k := range 20 {
			batch = append(batch, ioRecord(i*20+k))
		}
		c.IORecords("cn1", batch)
		last = batch[19].Path
	}
	if q := c.QueueBytes(); q > 1<<18 {
		t.Errorf("%d bytes queued, bound 256 KiB", q)
	}
	dropped := c.Stats().DroppedIORecords.Load()
	if dropped == 0 || dropped%20 != 0 {
		t.Fatalf("dropped %d records", dropped)
	}
	sink := &ioSink{}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skip("port taken meanwhile")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = wire.Serve(ctx, ln2, wire.ServerOptions{Log: slog.New(slog.DiscardHandler)}, sink) }()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(runCtx) }()
	defer func() { stop(); <-done }()
	waitFor(t, "the kept records", func() bool { return uint64(sink.count())+dropped == 2000 })
	if sink.got[len(sink.got)-1].Path != last {
		t.Errorf("last record %s, want the newest", sink.got[len(sink.got)-1].Path)
	}
}

// BenchmarkIORecords: a frame of 1,000 records (one node's busy interval)
// encoded, and decoded as every receiver checks it; an aggregator relays
// the checked payload (decode only), where decode and re-encode would add
// the encoding.
func BenchmarkIORecords(b *testing.B) {
	var in []appio.FileRecord
	for i := range 1000 {
		in = append(in, ioRecord(i))
	}
	frame := wire.AppendIORecords(nil, "cn1", in)
	payload := frame[6 : len(frame)-4]
	b.Run("encode", func(b *testing.B) {
		var buf []byte
		b.SetBytes(int64(len(frame)))
		for range b.N {
			buf = wire.AppendIORecords(buf[:0], "cn1", in)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
	})
	b.Run("decode", func(b *testing.B) {
		var recs []appio.FileRecord
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for range b.N {
			var err error
			if _, recs, err = wire.DecodeIORecords(payload, recs[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
		b.ReportMetric(float64(len(frame))/float64(len(in)), "bytes/record")
	})
	b.Run("check", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for range b.N {
			if _, err := wire.CheckIORecords(payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/record")
	})
}
