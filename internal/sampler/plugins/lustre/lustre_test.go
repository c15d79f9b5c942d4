package lustre_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/lustre"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// cases are the fixture trees (testdata/README.md) and the jobid_format
// their servers' job ids have.
var cases = map[string]string{"v2_12": "%j", "v2_15": "slurm.%j", "newer": "slurm.%j"}

func config(format string) *lustre.Config {
	c := lustre.DefaultConfig()
	c.JobIDFormat = format
	return c
}

// TestFixtures samples each tree twice and compares with its want.txt.
func TestFixtures(t *testing.T) {
	for name, format := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			p, _ := testutil.NewPlugin(t, "lustre", dir, config(format))
			var b metric.Batch
			now := time.Unix(1700000000, 0)
			for range 2 {
				b.Reset(now)
				if err := p.Sample(context.Background(), now, &b); err != nil {
					t.Fatalf("sample: %v", err)
				}
			}
			testutil.Golden(t, filepath.Join(dir, "want.txt"), testutil.Render(t, &b))
		})
	}
}
