package metric

import (
	"fmt"
	"testing"
)

func TestSeriesLabels(t *testing.T) {
	for _, tc := range []struct {
		job  string
		d    *Desc
		want string
		ok   bool
	}{
		{"node", NewDesc("node_load1", "", Gauge), "[{__name__ node_load1} {job node} {instance cn01} {node cn01}]", true},
		{"node", NewDesc("node_memory_numa_MemFree", "", Gauge, "node", "0"), "[{__name__ node_memory_numa_MemFree} {job node} {instance cn01} {node 0}]", true},
		{"", NewDesc("node_memory_numa_MemFree", "", Gauge, "node", "0"), "[{__name__ node_memory_numa_MemFree} {node cn01} {exported_node 0}]", true},
		{"node", NewDesc("m", "", Gauge, "instance", "a", "job", "b"), "[{__name__ m} {job node} {instance cn01} {node cn01} {exported_instance a} {exported_job b}]", true},
		{"node", NewDesc("m", "", Gauge, "__name__", "x", "a", "1"), "[{__name__ m} {job node} {instance cn01} {node cn01} {a 1}]", false},
	} {
		got, ok := SeriesLabels(nil, tc.job, "cn01", tc.d)
		if fmt.Sprint(got) != tc.want || ok != tc.ok {
			t.Errorf("job %q, %s%v: %v %v, want %s %v", tc.job, tc.d.Name, tc.d.Labels, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAppendSeriesOwnLabelWins(t *testing.T) {
	d := NewDesc("node_memory_numa_MemFree", "", Gauge, "node", "0")
	got := string(AppendSeries(nil, d, []Label{{"node", "cn01"}, {"rack", "r1"}}))
	if want := `node_memory_numa_MemFree{rack="r1",node="0"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
