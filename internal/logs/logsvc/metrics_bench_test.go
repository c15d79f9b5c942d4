package logsvc

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/pattern"
	"github.com/vigil-hpc/vigil/internal/store"
)

// bareService is the mining part of a Service, without listeners or store.
func bareService(metrics bool) *Service {
	s := &Service{miner: pattern.New(pattern.Config{}), stats: map[uint64]*patternStats{}, aliases: map[uint64]uint64{},
		mcfg: MetricsConfig{}.withDefaults()}
	if metrics {
		s.counters = newLogCounters()
	}
	return s
}

// records are n messages of 50 patterns from 512 hosts at 8 severities.
func records(n int) []logstore.Record {
	recs := make([]logstore.Record, n)
	now := time.Now()
	for i := range recs {
		recs[i] = logstore.Record{Received: now, Host: fmt.Sprintf("cn%04d", i%512), App: fmt.Sprintf("app%d", i%5),
			Severity: uint8(i % 8), Text: fmt.Sprintf("event%d happened to unit %d after %d ms", i%10, i, i%977)}
	}
	return recs
}

// TestCountNoAllocs: counting a message of a known label set and host
// allocates nothing, so the metrics add no garbage per message.
func TestCountNoAllocs(t *testing.T) {
	s := bareService(true)
	recs := records(4096)
	for i := range recs {
		s.mine(&recs[i])
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s.count(&recs[i%len(recs)], false)
		i++
	})
	if allocs != 0 {
		t.Errorf("count allocates %v times per message", allocs)
	}
}

// BenchmarkMine is the miner's cost per message with and without the
// pattern counters.
func BenchmarkMine(b *testing.B) {
	recs := records(4096)
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("counters=%v", on), func(b *testing.B) {
			s := bareService(on)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.mine(&recs[i%len(recs)])
				i++
			}
		})
	}
}

// BenchmarkWriteMetrics writes the bounds' worth of series (5,000
// pattern label sets, 1,000 top-host series from 20,000 pairs) into a
// store, as every interval does.
func BenchmarkWriteMetrics(b *testing.B) {
	st, err := store.Open(store.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := bareService(true)
	s.mcfg.Appendable = st
	now := time.Now().Add(-12 * time.Hour) // the store refuses the future
	// word spells i in letters: the miner masks digits.
	word := func(i int) string {
		var b []byte
		for i++; i > 0; i /= 26 {
			b = append(b, byte('a'+i%26))
		}
		return string(b)
	}
	fill := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := range 5000 {
			r := logstore.Record{Received: now, Host: fmt.Sprintf("cn%05d", i*4%20000), App: fmt.Sprintf("app%d", i%40),
				Severity: uint8(i % 8), Text: word(i) + " failed " + word(i+100000)}
			for range 4 {
				s.mine(&r)
				r.Host = fmt.Sprintf("cn%05d", (i*4+1)%20000)
			}
		}
	}
	fill()
	b.ReportAllocs()
	var spent time.Duration
	for b.Loop() {
		now = now.Add(15 * time.Second)
		t0 := time.Now()
		if err := s.writeMetrics(now); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(t0)
		b.StopTimer()
		fill()
		b.StartTimer()
	}
	b.ReportMetric(spent.Seconds()*1000/float64(b.N), "ms/write")
	b.ReportMetric(float64(len(s.counters.written)), "series")
	b.ReportMetric(float64(s.miner.Len()), "patterns")
}

// BenchmarkCount is what the counters add to mining a message: counting
// it once its label set and host are known.
func BenchmarkCount(b *testing.B) {
	s := bareService(true)
	recs := records(4096)
	for i := range recs {
		s.mine(&recs[i])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.count(&recs[i%len(recs)], false)
		i++
	}
}
