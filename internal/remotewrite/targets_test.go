package remotewrite

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// TestTargetLabels checks ticks go out labelled as the store keeps them:
// job and instance beside node, a NUMA node label kept.
func TestTargetLabels(t *testing.T) {
	for _, tc := range []struct {
		d    *metric.Desc
		want string
	}{
		{metric.NewDesc("node_load1", "", metric.Gauge), `__name__="node_load1",instance="cn01",job="node",node="cn01",`},
		{metric.NewDesc("node_memory_numa_MemFree", "", metric.Gauge, "node", "0"), `__name__="node_memory_numa_MemFree",instance="cn01",job="node",node="0",`},
	} {
		req := decode(t, appendWriteRequest(nil, []sample{{labels: appendTargetLabels(nil, "node", "cn01", tc.d)}}))
		if got := labelsOf(req.Timeseries[0]); got != tc.want {
			t.Errorf("labels = %s, want %s", got, tc.want)
		}
	}
}
