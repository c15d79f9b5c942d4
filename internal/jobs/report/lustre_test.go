package report

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/lustre"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestReportLustre runs the lustre plugin on its Lustre 2.15 fixture (an
// OSS and MDS whose clients tag requests "slurm.<id>") as server node
// oss1, stores its ticks beside a job's compute nodes, and checks the
// report's Lustre section against the plugin's own per-job samples.
func TestReportLustre(t *testing.T) {
	st, q := newStore(t)
	nodes := nodeNames(2)
	synthJob(t, st, "2001", nodes, []nodeLoad{flat, flat}, 4, 4<<30, t0, 10*time.Minute, 10*time.Second, 0, 0)

	cfg := lustre.DefaultConfig()
	cfg.JobIDFormat = "slurm.%j"
	p, _ := testutil.NewPlugin(t, "lustre", "../../sampler/plugins/lustre/testdata/v2_15", cfg)
	var b metric.Batch
	for tick := 10 * time.Second; tick <= 10*time.Minute; tick += 10 * time.Second {
		at := t0.Add(tick)
		b.Reset(at)
		if err := p.Sample(context.Background(), at, &b); err != nil {
			t.Fatal(err)
		}
		if err := st.AppendTick("oss1", at, b.Descs, b.Values, false); err != nil {
			t.Fatal(err)
		}
	}
	// What the plugin sent for job 2001, added up as the section does.
	var want LustreFS
	want.FS = "work"
	for i, d := range b.Descs {
		l := map[string]string{}
		for _, lb := range d.Labels {
			l[lb.Name] = lb.Value
		}
		if l["jobid"] != "2001" {
			continue
		}
		v, mdt := b.Values[i], l["component"] == "mdt"
		switch d.Name {
		case "lustre_job_read_bytes_total":
			want.ReadBytes += v
		case "lustre_job_write_bytes_total":
			want.WriteBytes += v
		case "lustre_job_read_samples_total":
			if !mdt {
				want.Reads += v
			}
		case "lustre_job_write_samples_total":
			if !mdt {
				want.Writes += v
			}
		case "lustre_job_stats_total":
			op := l["operation"]
			if slices.Contains([]string{"read", "write", "punch"}, op) && mdt || op == "read" || op == "write" {
				continue
			}
			if mdt {
				want.MetadataOps += v
			} else {
				want.OSTOps += v
			}
		}
	}
	want.OSTs, want.MDTs = 1, 1
	if want.ReadBytes == 0 || want.WriteBytes == 0 || want.MetadataOps == 0 || want.OSTOps == 0 {
		t.Fatalf("the fixture should give job 2001 reads, writes, metadata and OST ops: %+v", want)
	}

	job := jobs.Job{ID: "2001", Nodes: nodes, CPUs: 8, Start: t0, End: t0.Add(10 * time.Minute), State: jobs.StateCompleted}
	r, err := Build(context.Background(), q, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Lustre) != 1 || r.Lustre[0] != want {
		t.Fatalf("lustre section %+v, want [%+v]", r.Lustre, want)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "Lustre") || !strings.Contains(txt.String(), "work ") {
		t.Errorf("text report without the Lustre block:\n%s", txt.String())
	}
	// Once the samples expire the kept summary gives the same section.
	again := fromKeptSummary(t, r)
	if len(again.Lustre) != 1 || again.Lustre[0] != want {
		t.Fatalf("lustre section from the summary %+v, want [%+v]", again.Lustre, want)
	}
	if got, was := sectionText(t, again, "Lustre"), sectionText(t, r, "Lustre"); got != was {
		t.Errorf("lustre block from the summary:\n%s\nfrom the samples:\n%s", got, was)
	}

	// Another job of the same servers is not mixed in, and a job the
	// servers never saw has no section.
	job.ID = "77"
	synthJob(t, st, "77", nodes, []nodeLoad{flat, flat}, 4, 4<<30, t0, 10*time.Minute, 10*time.Second, 0, 0)
	r, err = Build(context.Background(), q, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.Lustre != nil {
		t.Errorf("job 77: lustre section %+v, want none", r.Lustre)
	}
}

func TestLustreFS(t *testing.T) {
	for target, want := range map[string]string{"scratch-OST0001": "scratch", "a-b-MDT000a": "a-b", "scratch-ffff8f2e": "", "OST0001": ""} {
		if got := lustreFS(target); got != want {
			t.Errorf("%q: %q, want %q", target, got, want)
		}
	}
}
