package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// fullDescs are a node's series in the disk-full tests: enough that a
// tick's WAL record is larger than a 32 KiB WAL page, so a write failing
// at a page boundary tears the record.
var fullDescs = func() []*metric.Desc {
	ds := make([]*metric.Desc, 4000)
	for i := range ds {
		ds[i] = metric.NewDesc("node_test_value", "Test.", metric.Gauge, "i", fmt.Sprint(i))
	}
	return ds
}()

// tickValues are tick k's values: distinct per tick and series, and noisy
// enough that the WAL cannot compress them away.
func tickValues(k int) []float64 {
	vs := make([]float64, len(fullDescs))
	for i := range vs {
		vs[i] = float64(k)*1000.123 + float64(i)*7.77 + float64((k*7919+i*104729)%1000003)
	}
	return vs
}

func tickTime(k int) time.Time { return base.Add(time.Duration(k) * time.Second) }

// checkTicks fails unless every tick in acked is stored with its values.
func checkTicks(t *testing.T, s *Store, node string, acked []int) {
	t.Helper()
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_test_value"),
		labels.MustNewMatcher(labels.MatchEqual, NodeLabel, node))
	byT := map[string]map[int64]float64{}
	for k, ps := range got {
		m := map[int64]float64{}
		for _, p := range ps {
			m[p.T] = p.V
		}
		byT[k] = m
	}
	lost := 0
	for _, k := range acked {
		vs := tickValues(k)
		for i, d := range fullDescs {
			key := labels.FromStrings(labels.MetricName, d.Name, NodeLabel, node, "i", d.Labels[0].Value).String()
			v, ok := byT[key][tickTime(k).UnixMilli()]
			if !ok || v != vs[i] {
				lost++
				if lost < 5 {
					t.Errorf("acknowledged tick %d of %s: series %s = %v, %v; want %v", k, node, key, v, ok, vs[i])
				}
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged samples missing or wrong", lost)
	}
}

func TestDiskFullTornWALKeepsAcknowledged(t *testing.T) {
	dir := testutil.TmpFS(t, 24<<20)
	opts := Options{Dir: dir, MinFreeBytes: -1, CheckInterval: time.Hour}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	filler := testutil.Fill(t, dir, "filler")
	// Leave room for a few ticks, so the WAL fills up mid-record.
	st, _ := os.Stat(filler)
	if err := os.Truncate(filler, st.Size()-1<<20); err != nil {
		t.Fatal(err)
	}
	var acked []int
	k := 0
	for ; k < 10000; k++ {
		err = s.AppendTick("cn01", tickTime(k), fullDescs, tickValues(k))
		if err != nil {
			break
		}
		acked = append(acked, k)
	}
	t.Logf("%d ticks acknowledged before: %v", len(acked), err)
	var nw *NotWritableError
	if !errors.As(err, &nw) || !errors.Is(err, ErrNotWritable) || nw.Reason != "disk_full" {
		t.Fatalf("append on a full disk: %v, want a disk_full NotWritableError", err)
	}
	if err := s.AppendTick("cn01", tickTime(k+1), fullDescs, tickValues(k+1)); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("append after a failed write: %v, want ErrNotWritable", err)
	}
	checkTicks(t, s, "cn01", acked) // still readable
	k += 2
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.check() // reopens
	if err := s.Writable(); err != nil {
		t.Fatalf("after space returned: %v", err)
	}
	for end := k + 100; k < end; k++ {
		if err := s.AppendTick("cn01", tickTime(k), fullDescs, tickValues(k)); err != nil {
			out, _ := exec.Command("sh", "-c", "df -k "+dir+"; ls -laR "+dir).CombinedOutput()
			t.Fatalf("append after recovery: %v\n%s", err, out)
		}
		acked = append(acked, k)
	}
	checkTicks(t, s, "cn01", acked)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkTicks(t, s, "cn01", acked)
}
