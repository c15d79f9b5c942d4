package lustre

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

// fuzzParser feeds data to parser p as the file of kind k, twice (the
// second read hits the caches), and checks what comes out: no panic, at
// most four samples a line, each series once, label values UTF-8.
func fuzzParser(f *testing.F, k int, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(p) == Kinds[k].File && filepath.Base(filepath.Dir(filepath.Dir(p))) == Kinds[k].Dir {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := DefaultConfig()
		cfg.JobIDFormat = "slurm.%j"
		cfg.MaxJobs = 50
		cfg.MaxJobSeries = 500
		l := New(cfg)
		if err := l.Init(sampler.Env{FS: kernfs.NewFS(t.TempDir()), Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
		s := &source{kind: &Kinds[k], ki: k, target: "fs-OST0000", file: kernfs.NewFile("fuzz", 64)}
		lines := 1
		for _, c := range data {
			if c == '\n' {
				lines++
			}
		}
		for range 2 {
			l.tick++
			var b metric.Batch
			budget := cfg.MaxJobSeries
			switch Kinds[k].Parser {
			case pStats:
				l.stats(s, data, &b)
			case pRPC:
				l.rpcStats(s, data, &b)
			case pJobs:
				budget = l.jobStats(s, data, &b, budget)
			}
			if b.Len() > 4*lines {
				t.Fatalf("%d samples from %d lines", b.Len(), lines)
			}
			if budget < 0 {
				t.Fatalf("budget %d", budget)
			}
			seen := map[*metric.Desc]bool{}
			for _, d := range b.Descs {
				if d == nil || seen[d] {
					t.Fatalf("nil or repeated series %v", d)
				}
				seen[d] = true
				for _, lb := range d.Labels {
					if !utf8.ValidString(lb.Value) {
						t.Fatalf("label %s not UTF-8: %q", lb.Name, lb.Value)
					}
				}
			}
		}
		if l.nJobs > cfg.MaxJobs {
			t.Fatalf("%d jobs followed, max %d", l.nJobs, cfg.MaxJobs)
		}
	})
}

func FuzzStats(f *testing.F) {
	fuzzParser(f, 6, "read_bytes 3 samples [bytes] 1 2 3\nopen 1 samples [reqs]\n", "write_bytes 1 samples [bytes]\n")
}

func FuzzRPCStats(f *testing.F) {
	fuzzParser(f, 2, "\t\t\tread\t\t\twrite\npages per rpc  rpcs %\n1:\t\t1 1 1 | 2 2 2\n", "1: 2 3 4\n")
}

func FuzzJobStats(f *testing.F) {
	fuzzParser(f, 7, "job_stats:\n- job_id: slurm.1\n  open: { samples: 1, unit: reqs }\n",
		"- job_id: \"x\"\n  read_bytes: { samples: 1, min: 2, max: 3, sum: 4, sumsq: 5, new: 6 }\n", "- job_id:\n  open: {")
}
