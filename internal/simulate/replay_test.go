package simulate

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// recording builds a recording text of n ticks: a USER_HZ counter, a
// millisecond counter, a microsecond counter, an integer counter, a gauge and a series that is
// only there on even ticks.
func recording(n int) string {
	var b strings.Builder
	for k := range n {
		ts := 1_795_000_000_000 + int64(k)*1000
		fmt.Fprintf(&b, "# HELP node_cpu_seconds_total Seconds.\n# TYPE node_cpu_seconds_total counter\n")
		fmt.Fprintf(&b, "node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} %v %d\n", float64(1000+7*k)/100, ts)
		fmt.Fprintf(&b, "# TYPE node_disk_io_time_seconds_total counter\n")
		fmt.Fprintf(&b, "node_disk_io_time_seconds_total{device=\"sda\"} %v %d\n", float64(5000+3*k)*(1.0/1000), ts)
		fmt.Fprintf(&b, "# TYPE node_intr_total counter\nnode_intr_total %d %d\n", 100+k*k, ts)
		fmt.Fprintf(&b, "# TYPE vigil_sampler_cpu_seconds_total counter\nvigil_sampler_cpu_seconds_total %v %d\n", float64(123457+11*k)/1e6, ts)
		fmt.Fprintf(&b, "# TYPE node_load1 gauge\nnode_load1 %v %d\n", float64(k%3)/100, ts)
		if k%2 == 0 {
			fmt.Fprintf(&b, "vigil_process_rss_bytes{pid=\"42\",command=\"a b\"} 4096 %d\n", ts)
		}
	}
	return b.String()
}

func TestRecordingReplayContinuesCountersExactly(t *testing.T) {
	rec, err := ReadRecording(strings.NewReader(recording(4)))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Ticks() != 4 || rec.Series() != 6 || rec.Interval() != time.Second {
		t.Fatalf("ticks %d series %d interval %s", rec.Ticks(), rec.Series(), rec.Interval())
	}
	n := NewReplayNode("cn00001", rec, 2)
	var b metric.Batch
	got := map[string][]float64{}
	for range 7 { // ticks 2, 3, then 0..3 and 0 of the second and third pass
		b.Reset(time.Now())
		n.Sample(time.Now(), time.Second, &b)
		for _, s := range b.Samples() {
			got[s.Desc.Name] = append(got[s.Desc.Name], s.Value)
		}
	}
	// Recorded positions and passes of the 7 calls.
	pos := []int{2, 3, 0, 1, 2, 3, 0}
	pass := []int{0, 0, 1, 1, 1, 1, 2}
	for i := range pos {
		k, p := pos[i], pass[i]
		// Spans over the recording: cpu 21 ticks, disk 9 ms, intr 9.
		if want := float64(1000+7*k+21*p) / 100; math.Float64bits(got["node_cpu_seconds_total"][i]) != math.Float64bits(want) {
			t.Errorf("call %d: cpu %v, want %v", i, got["node_cpu_seconds_total"][i], want)
		}
		if want := float64(5000+3*k+9*p) * (1.0 / 1000); math.Float64bits(got["node_disk_io_time_seconds_total"][i]) != math.Float64bits(want) {
			t.Errorf("call %d: disk %v, want %v", i, got["node_disk_io_time_seconds_total"][i], want)
		}
		if want := float64(123457+11*k+33*p) / 1e6; math.Float64bits(got["vigil_sampler_cpu_seconds_total"][i]) != math.Float64bits(want) {
			t.Errorf("call %d: microseconds %v, want %v", i, got["vigil_sampler_cpu_seconds_total"][i], want)
		}
		if want := float64(100 + k*k + 9*p); got["node_intr_total"][i] != want {
			t.Errorf("call %d: intr %v, want %v", i, got["node_intr_total"][i], want)
		}
		if want := float64(k%3) / 100; got["node_load1"][i] != want {
			t.Errorf("call %d: gauge %v, want %v (gauges are not continued)", i, got["node_load1"][i], want)
		}
	}
	if len(got["vigil_process_rss_bytes"]) != 4 {
		t.Errorf("intermittent series replayed %d times, want 4", len(got["vigil_process_rss_bytes"]))
	}
}

func TestRecordingErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"# TYPE a counter\na 1 1000\na 2\n", "3: sample without a timestamp"},
		{"a 1 2000\na 2 1000\n", "2: timestamp 1000 goes back"},
		{"a 1 1000\n\na{ 2 2000\n", "3: "},
		{"a{node=\"x\"} 1 1000\na 1 2000\n", `1: recorded series carry no "node" label`},
		{"a 1 1000\n", "a recording needs at least two ticks"},
		{"", "a recording needs at least two ticks"},
	} {
		_, err := ReadRecording(strings.NewReader(tc.text))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}

func FuzzReadRecording(f *testing.F) {
	f.Add([]byte(recording(3)))
	f.Add([]byte("a 1 1000\na 2 2000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ReadRecording(bytes.NewReader(data))
		if err != nil {
			return
		}
		n := NewReplayNode("x", rec, len(data))
		var b metric.Batch
		for range 2*rec.Ticks() + 1 {
			b.Reset(time.Time{})
			n.Sample(time.Time{}, time.Second, &b)
		}
	})
}
