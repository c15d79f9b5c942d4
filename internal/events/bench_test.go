package events

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fill stores n events as a cluster of 20,000 nodes would make them: node
// up and down, gaps, job starts and ends, a few health and alert events,
// one second apart ending now; job events name 4 nodes each.
func fill(tb testing.TB, s *Store, n int, now time.Time) {
	tb.Helper()
	kinds := []string{KindGap, KindNodeDown, KindNodeUp, KindJobStart, KindJobEnd, KindHealthFail, KindHealthPass, KindAlertFiring, KindAlertResolved}
	const chunk = 10000
	batch := make([]Event, 0, chunk)
	for i := 0; i < n; i++ {
		k := kinds[i%len(kinds)]
		e := Event{Time: now.Add(time.Duration(i-n) * time.Second), Kind: k, Node: fmt.Sprintf("cn%05d", (i*7919)%20000), Severity: SeverityInfo}
		switch k {
		case KindNodeDown, KindHealthFail:
			e.Severity = SeverityCritical
			e.Summary = "node " + e.Node + " down"
			e.Link = "#/node/" + e.Node
		case KindJobStart, KindJobEnd:
			e.Job = strconv.Itoa(100000 + i/20)
			e.Nodes = []string{e.Node, fmt.Sprintf("cn%05d", (i*7919+1)%20000), fmt.Sprintf("cn%05d", (i*7919+2)%20000), fmt.Sprintf("cn%05d", (i*7919+3)%20000)}
			e.Node = ""
			e.Summary = "job " + e.Job + " (user alice) started on 4 nodes"
			e.Labels = map[string]string{"user": "alice"}
		case KindAlertFiring:
			e.Severity = SeverityWarning
			e.Summary = "NodeFilesystemAlmostFull on " + e.Node
			e.Labels = map[string]string{"alertname": "NodeFilesystemAlmostFull", "mountpoint": "/scratch"}
		default:
			e.Summary = "gap of 3s in " + e.Node
		}
		batch = append(batch, e)
		if len(batch) == chunk || i == n-1 {
			b := batch
			s.do(func() { s.write(b) })
			batch = make([]Event, 0, chunk)
		}
	}
}

// BenchmarkQuery1M queries 1,000,000 stored events: the issue asks ≤ 100 ms
// for a filtered query. It also reports the index's heap and the process's
// RSS growth for them.
func BenchmarkQuery1M(b *testing.B) {
	const n = 1_000_000
	now := time.Now()
	debug.FreeOSMemory()
	heap0, rss0 := heapInUse(), rss()
	s := open(b, Options{Dir: b.TempDir(), now: func() time.Time { return now }})
	fill(b, s, n, now)
	debug.FreeOSMemory() // RSS: what stays, not the garbage of filling
	if s.Len() != n {
		b.Fatalf("%d events stored, want %d", s.Len(), n)
	}
	heapMB, rssMB := float64(heapInUse()-heap0)/1e6, float64(rss()-rss0)/1e6
	var disk int64
	for _, sg := range s.segs {
		disk += sg.size
	}
	b.Logf("1M events: index heap %.1f MB, RSS growth %.1f MB, %.1f MB on disk", heapMB, rssMB, float64(disk)/1e6)
	for _, c := range []struct {
		name string
		f    Filter
	}{
		{"newest100", Filter{}},
		{"node_exact", Filter{Node: "cn00042"}},
		{"node_glob_kind", Filter{Node: "cn001*", Kinds: []string{KindNodeDown}}},
		{"job", Filter{Job: "123456"}},
		{"severity_since_1h", Filter{Severities: []string{SeverityCritical}, Since: now.Add(-time.Hour)}},
		{"rare_full_scan", Filter{Node: "cn1999*", Kinds: []string{KindAlertFiring}, Since: now.Add(-300 * 24 * time.Hour)}},
		{"page_10000", Filter{Kinds: []string{KindGap}, Limit: MaxLimit, Before: n / 2}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.ReportMetric(heapMB, "index-heap-MB")
			for b.Loop() {
				if _, _, err := s.Query(c.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rss is the process's resident set in bytes (0 if unknown).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
