package fabric

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/store"
)

// bigFabric is a store holding 70 s at 1 Hz of the simulated fat tree of
// 256 switches (238 leaves of 18 nodes, 18 spines) and 12,852 ports,
// ibsim's largest, as its 238 sweepers send it; built once per run.
var bigFabric = sync.OnceValues(func() (*Service, error) {
	dir, err := osMkdirTemp()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(store.Options{Dir: dir, Job: "node", MinFreeBytes: -1, Registerer: nil})
	if err != nil {
		return nil, err
	}
	now := time.Now().Truncate(time.Second)
	if err := fillFabric(st, simulate.FabricOptions{Nodes: 238 * 18, Seed: 1, Spines: 18}, now, 70*time.Second); err != nil {
		return nil, err
	}
	return New(Options{Query: query.New(st, query.Options{}), Now: func() time.Time { return now }}), nil
})

// BenchmarkRead is one /api/v1/fabric answer for 256 switches and 12,852
// ports; BenchmarkPortInfoFloor, the one query of it that cannot be
// avoided (every port's info series), is its floor.
func BenchmarkRead(b *testing.B) {
	svc, err := bigFabric()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f, err := read(ctx, svc.o.Query, svc.o.Now(), time.Minute) // not the cache
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Switches) != 256 || len(f.Links) != 12852 {
			b.Fatalf("%d switches, %d ports", len(f.Switches), len(f.Links))
		}
		if i == 0 {
			j, _ := json.Marshal(f)
			var z bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
			zw.Write(j)
			zw.Close()
			b.ReportMetric(float64(len(j)), "answer_bytes")
			b.ReportMetric(float64(z.Len()), "gzipped_bytes")
		}
	}
}

func BenchmarkPortInfoFloor(b *testing.B) {
	svc, err := bigFabric()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ss, err := svc.o.Query.(*query.API).InstantSamples(ctx, MetricPortInfo, svc.o.Now())
		if err != nil || len(ss) != 12852 {
			b.Fatal(len(ss), err)
		}
	}
}

// BenchmarkTop ranks the read fabric and attributes 500 running jobs.
func BenchmarkTop(b *testing.B) {
	svc, err := bigFabric()
	if err != nil {
		b.Fatal(err)
	}
	f, err := svc.Read(context.Background(), time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	var running []*jobsJob
	for j := range 500 {
		var nodes []string
		for k := range 8 {
			nodes = append(nodes, simulate.NodeName(1+(j*8+k)%(238*18)))
		}
		running = append(running, &jobsJob{ID: itoa(j), Nodes: nodes})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		top := TopOf(f, running, ByXmitWait, DefaultTopLimit, nil, "")
		if len(top.Links) != DefaultTopLimit {
			b.Fatal(len(top.Links))
		}
	}
}

type jobsJob = jobs.Job

func itoa(i int) string { return strconv.Itoa(i) }

var benchDir string

func osMkdirTemp() (string, error) {
	d, err := os.MkdirTemp("", "vigil-fabric-bench-*")
	benchDir = d
	return d, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// BenchmarkReadPromQL is BenchmarkRead's peer: the same answer from seven
// PromQL expressions, as the fabric was read before the scan.
func BenchmarkReadPromQL(b *testing.B) {
	svc, err := bigFabric()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f, err := readPromQL(ctx, svc.o.Query.(*query.API), svc.o.Now(), time.Minute)
		if err != nil || len(f.Links) != 12852 {
			b.Fatal(err)
		}
	}
}

// fillFabric stores span at 1 Hz, up to now, of the simulated fabric o as
// its sweepers send it.
func fillFabric(st *store.Store, o simulate.FabricOptions, now time.Time, span time.Duration) error {
	st.LimitSeries(store.SeriesLimits{PerNode: -1, MaxHeadSeries: -1})
	f, err := simulate.NewFabric(o)
	if err != nil {
		return err
	}
	var b metric.Batch
	for i := range o.Nodes {
		sw := f.Sweeper(i)
		if sw == nil {
			continue
		}
		for ts := now.Add(-span); !ts.After(now); ts = ts.Add(time.Second) {
			b.Reset(ts)
			sw.Sample(ts, time.Second, &b)
			if err := st.AppendTick(simulate.NodeName(1+i), ts, b.Descs, b.Values, true); err != nil {
				return err
			}
		}
	}
	return nil
}
