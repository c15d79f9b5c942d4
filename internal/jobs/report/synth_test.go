package report

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
)

// nodeLoad says what one synthetic node of a job does at second i of its
// run: cores busy, memory used and I/O rates.
type nodeLoad func(i int) (cores, mem, readRate, writeRate float64)

// jobDescs are the jobs plugin's series of one job.
type jobDescs struct {
	running, user, system, cpus, mem, limit, ooms, read, write *metric.Desc
	all                                                        []*metric.Desc
}

func newJobDescs(id string) *jobDescs {
	d := func(name string, typ metric.Type) *metric.Desc {
		return metric.NewDesc(name, "", typ, "jobid", id)
	}
	j := &jobDescs{
		running: d("vigil_job_running", metric.Gauge),
		user:    d("vigil_job_cpu_user_seconds_total", metric.Counter),
		system:  d("vigil_job_cpu_system_seconds_total", metric.Counter),
		cpus:    d("vigil_job_cpus", metric.Gauge),
		mem:     d("vigil_job_memory_used_bytes", metric.Gauge),
		limit:   d("vigil_job_memory_limit_bytes", metric.Gauge),
		ooms:    d("vigil_job_oom_kills_total", metric.Counter),
		read:    d("vigil_job_read_bytes_total", metric.Counter),
		write:   d("vigil_job_write_bytes_total", metric.Counter),
	}
	j.all = []*metric.Desc{j.running, j.user, j.system, j.cpus, j.mem, j.limit, j.ooms, j.read, j.write}
	return j
}

// synthJob writes a job's series into st as the jobs plugin would send
// them: ticks every interval from start for dur (every second in the last
// tail of it), counters integrated from the loads; cgroup counters start
// at 0. oomAt (>0) adds one OOM kill on the first node at that second.
func synthJob(tb testing.TB, st *store.Store, id string, nodes []string, loads []nodeLoad, cpus int, limit float64, start time.Time, dur, interval, tail time.Duration, oomAt int) {
	tb.Helper()
	d := newJobDescs(id)
	type counters struct{ user, system, read, write, ooms float64 }
	acc := make([]counters, len(nodes))
	vals := make([]float64, len(d.all))
	for prev, t := time.Duration(0), interval; t <= dur; prev, t = t, t+interval {
		if t > dur-tail {
			t = prev + time.Second
		}
		sec := (t - prev).Seconds()
		i := int(t / time.Second)
		for k, n := range nodes {
			cores, mem, rd, wr := loads[k](i)
			c := &acc[k]
			// Counters advance over the interval that ends at this tick,
			// in the plugin's units: USER_HZ ticks for CPU, bytes for I/O.
			c.user += cores * 0.8 * sec
			c.system += cores * 0.2 * sec
			c.read += rd * sec
			c.write += wr * sec
			if k == 0 && oomAt > 0 && i == oomAt {
				c.ooms++
			}
			vals[0], vals[1], vals[2], vals[3], vals[4] = 1, c.user, c.system, float64(cpus), mem
			vals[5], vals[6], vals[7], vals[8] = limit, c.ooms, c.read, c.write
			if err := st.AppendTick(n, start.Add(t), d.all, vals, false); err != nil {
				tb.Fatalf("append %s at %v: %v", n, t, err)
			}
		}
	}
}

// newStore opens a store in a temporary directory and its query API.
func newStore(tb testing.TB) (*store.Store, Querier) {
	tb.Helper()
	st, err := store.Open(store.Options{Dir: tb.TempDir(), Job: "node", MinFreeBytes: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, APIQuerier{API: query.New(st, query.Options{})}
}

func nodeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cn%d", i+1)
	}
	return out
}
