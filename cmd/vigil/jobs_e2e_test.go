package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2ESampleJobs runs the acceptance command on the jobs
// plugin's fixture trees (cgroup v1 as Debian builds Slurm, v2 with and
// without system.slice) and compares the output with the plugin's goldens.
func TestE2ESampleJobs(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	for _, fx := range []string{"v1", "v2", "v2noslice"} {
		t.Run(fx, func(t *testing.T) {
			dir := filepath.Join("..", "..", "internal", "sampler", "plugins", "jobs", "testdata", fx)
			out, errOut, code := run(t, "sample", "--once", "--root", dir, "--plugins", "jobs")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			want, err := os.ReadFile(filepath.Join(dir, "want.txt"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.ReplaceAll(out, `node="`+host+`"`, `node="test"`)
			if got != string(want) {
				t.Errorf("output differs from %s/want.txt\n--- got ---\n%s", dir, out)
			}
			if !strings.Contains(out, "vigil_job_running{") {
				t.Errorf("no job series in the output")
			}
		})
	}
}
