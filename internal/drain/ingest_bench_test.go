package drain

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/ingest"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/store"
)

// BenchmarkIngestTick stores ticks through ingest into a real store, 1,000
// nodes of 100 node series and 20 checks (one failing), with no tap, the
// job index's tap, and the server's two taps: the health tap's share of a
// stored tick.
func BenchmarkIngestTick(b *testing.B) {
	for _, taps := range []string{"none", "jobs", "jobs+health"} {
		b.Run("tap="+taps, func(b *testing.B) {
			st, err := store.Open(store.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			o := ingest.Options{Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
			if taps != "none" {
				jm, err := jobs.New(jobs.Options{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				defer jm.Close()
				o.Tap = jm
				if taps == "jobs+health" {
					m, _ := newManager(b, Options{})
					o.Tap = ingest.Taps{jm, m}
				}
			}
			h := ingest.NewWithOptions(st, o)
			nodes := make([]*fakeNode, 1000)
			t0 := time.Now().Add(-time.Hour)
			for i := range nodes {
				n := newFakeNode("cn"+strconv.Itoa(i), 100, checkNames(20)...)
				n.t = t0
				n.set("c7", "bad", true)
				n.fill()
				h.Schema(n.name, n.descs)
				h.Tick(n.name, n.t, n.descs, n.values)
				nodes[i] = n
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				n := nodes[i%len(nodes)]
				n.t = n.t.Add(time.Millisecond)
				h.Tick(n.name, n.t, n.descs, n.values)
			}
		})
	}
}
