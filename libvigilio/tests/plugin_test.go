package libvigiliotest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	appioplugin "github.com/vigil-hpc/vigil/internal/sampler/plugins/appio"
)

// startPlugin runs the sampler's appio plugin on socket, on the real /proc.
func startPlugin(t *testing.T, socket string) *appioplugin.Plugin {
	t.Helper()
	cfg := appioplugin.DefaultConfig()
	cfg.Socket = socket
	p := appioplugin.New(cfg)
	if err := p.Init(sampler.Env{FS: kernfs.NewFS("/"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// jobBytes is what a tick at now says the job wrote, over its file systems.
func jobBytes(t *testing.T, p *appioplugin.Plugin, job string, now time.Time) float64 {
	t.Helper()
	var b metric.Batch
	b.Reset(now)
	if err := p.Sample(context.Background(), now, &b); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for i, d := range b.Descs {
		if d.Name != "vigil_appio_bytes_total" {
			continue
		}
		var isJob, isWrite bool
		for _, l := range d.Labels {
			isJob = isJob || l.Name == "jobid" && l.Value == job
			isWrite = isWrite || l.Name == "op" && l.Value == "write"
		}
		if isJob && isWrite {
			sum += b.Values[i]
		}
	}
	return sum
}

// TestPluginCountersRestart runs dd under the library against the real
// appio plugin: the job's series count every byte whatever restarts under
// them. A second process of the job after the first left and the grace
// period ended carries on from the job's total; a restarted sampler starts
// again at zero (a counter reset), and the last values of the two runs add
// up to all the job wrote.
func TestPluginCountersRestart(t *testing.T) {
	build(t)
	sock := filepath.Join(t.TempDir(), "appio.sock")
	out := filepath.Join(t.TempDir(), "x")
	job := []string{"SLURM_JOB_ID=4711"} // this test runs in no job cgroup: the HELLO's id counts
	l := &listener{path: sock}
	dd := func(kib int) {
		t.Helper()
		l.run(t, job, "dd", "if=/dev/zero", "of="+out, "bs=1k", "count="+strconv.Itoa(kib), "status=none", "conv=notrunc")
	}
	wait := func(p *appioplugin.Plugin, want float64, at func() time.Time) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := jobBytes(t, p, "4711", at())
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("job 4711 wrote %v bytes by the series, want %v", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	p1 := startPlugin(t, sock)
	dd(100)
	wait(p1, 102400, time.Now)
	grace := time.Duration(appioplugin.DefaultConfig().Grace)
	// dd has exited; its connection's close may still be on its way.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := jobBytes(t, p1, "4711", time.Now().Add(grace+time.Second))
		if got == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's series outlived its grace: %v", got)
		}
	}
	dd(50) // a later process of the same job
	wait(p1, 102400+51200, time.Now)
	last1 := jobBytes(t, p1, "4711", time.Now())

	p1.Close()
	p2 := startPlugin(t, sock)
	dd(10)
	wait(p2, 10240, time.Now)
	if total := last1 + jobBytes(t, p2, "4711", time.Now()); total != 163840 {
		t.Errorf("the two samplers' last values add up to %v bytes, want 163840", total)
	}
}
