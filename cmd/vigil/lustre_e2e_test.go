package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestE2ESampleLustre runs `vigil sample --once --root DIR --plugins
// lustre` on the plugin's fixture trees (Lustre 2.12 and 2.15 layouts)
// and compares with the plugin's goldens; the 2.15 servers' job ids are
// "slurm.<id>", mapped by jobid_format from the config file.
func TestE2ESampleLustre(t *testing.T) {
	const fixtures = "../../internal/sampler/plugins/lustre/testdata"
	for _, tc := range []struct{ tree, format string }{{"v2_12", "%j"}, {"v2_15", "slurm.%j"}} {
		t.Run(tc.tree, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "vigil.toml")
			if err := os.WriteFile(cfg, []byte("[plugins.lustre]\njobid_format = \""+tc.format+"\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(fixtures, tc.tree)
			out, errOut, code := run(t, "sample", "--once", "--config", cfg, "--root", root, "--plugins", "lustre", "--node", "test")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if !strings.Contains(out, `lustre_job_write_bytes_total{node="test",component="ost"`) {
				t.Fatalf("no per-job series:\n%s", out)
			}
			testutil.Golden(t, filepath.Join(root, "want.txt"), []byte(out))
		})
	}
}
