package simulate

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func BenchmarkNewNode(b *testing.B) {
	sch := NewSchema(16)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		NewNode(NodeName(int(i)), sch, i)
	}
}

// BenchmarkSample is the simulator's cost per node and tick.
func BenchmarkSample(b *testing.B) {
	n := NewNode("cn00001", NewSchema(16), 1)
	var batch metric.Batch
	t := time.Unix(1_763_800_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		t = t.Add(time.Second)
		batch.Reset(t)
		n.Sample(t, time.Second, &batch)
	}
}

// BenchmarkSampleCluster is the cost per node and tick on a 512-node
// cluster sampled in turn, without and with the scheduler (its steps
// included, about three quarters of the nodes running a job), and with the
// health checks too (vigil simulate's default).
func BenchmarkSampleCluster(b *testing.B) {
	for _, tc := range []struct{ jobs, health bool }{{false, false}, {true, false}, {true, true}} {
		b.Run(fmt.Sprintf("jobs=%v,health=%v", tc.jobs, tc.health), func(b *testing.B) {
			const nodes = 512
			t := time.Unix(1_763_800_000, 0)
			s, err := NewScheduler(SchedulerOptions{Nodes: nodes, CPUs: 16, Interval: time.Second, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			f, err := NewFaults(FaultOptions{Nodes: nodes, Interval: time.Second, Seed: 1, Start: t, Health: true})
			if err != nil {
				b.Fatal(err)
			}
			sch := NewSchema(16)
			ns := make([]*Node, nodes)
			for i := range ns {
				ns[i] = NewNode(NodeName(i+1), sch, uint64(i+1))
				if tc.jobs {
					ns[i].SetScheduler(s, i)
				}
				if tc.health {
					ns[i].SetFaults(f, i)
				}
			}
			var batch metric.Batch
			i, values := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				if i == 0 {
					t = t.Add(time.Second)
				}
				batch.Reset(t)
				ns[i].Sample(t, time.Second, &batch)
				values += batch.Len()
				i = (i + 1) % nodes
			}
			b.ReportMetric(float64(values)/float64(b.N), "values/op")
		})
	}
}

// BenchmarkSilent is the outage schedule's question, asked for every node
// at every tick.
func BenchmarkSilent(b *testing.B) {
	const nodes = 20000
	t := time.Unix(1_763_800_000, 0)
	f, err := NewFaults(FaultOptions{Nodes: nodes, Interval: time.Second, Seed: 1, Start: t, Outages: true})
	if err != nil {
		b.Fatal(err)
	}
	i, silent := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		if i == 0 {
			t = t.Add(time.Second)
		}
		if f.Silent(i, t) {
			silent++
		}
		i = (i + 1) % nodes
	}
}

// BenchmarkScheduler is the scheduler's share of a tick on 20,000 nodes:
// each node's look-up, the steps (ending, submitting, placing) included.
func BenchmarkScheduler(b *testing.B) {
	const nodes = 20000
	s, err := NewScheduler(SchedulerOptions{Nodes: nodes, CPUs: 16, Interval: time.Second, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	t := time.Unix(1_763_800_000, 0)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i == 0 {
			t = t.Add(time.Second)
		}
		s.at(i, t)
		i = (i + 1) % nodes
	}
}

// BenchmarkJobs is Scheduler.Jobs on 20,000 nodes after an hour: about
// 2,000 running and 20,000 ended jobs listed.
func BenchmarkJobs(b *testing.B) {
	s, err := NewScheduler(SchedulerOptions{Nodes: 20000, CPUs: 16, Interval: time.Second, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	t := time.Unix(1_763_800_000, 0)
	for k := range 3600 {
		s.at(0, t.Add(time.Duration(k)*time.Second))
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(s.Jobs()) < 10000 {
			b.Fatal("few jobs")
		}
	}
}

// BenchmarkHealthSeries is the health series' share of a node's tick
// (four checks, 16 values; a new check run every 30 ticks), on a flaky
// node.
func BenchmarkHealthSeries(b *testing.B) {
	t := time.Unix(1_763_800_000, 0)
	f, err := NewFaults(FaultOptions{Nodes: 20, Interval: time.Second, Seed: 1, Start: t, Health: true})
	if err != nil {
		b.Fatal(err)
	}
	n := NewNode("cn", NewSchema(1), 1)
	n.SetFaults(f, flakyNode(b, f, 0))
	var batch metric.Batch
	b.ReportAllocs()
	for b.Loop() {
		t = t.Add(time.Second)
		batch.Reset(t)
		n.healthSeries(t, &batch)
	}
}
