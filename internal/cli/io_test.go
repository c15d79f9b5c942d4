package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/iorecords"
)

// vigil io top against a real record store behind its API handler: the
// table, --json, --job and --by reach the server; mistakes are usage
// errors.
func TestIOTopCommand(t *testing.T) {
	st, err := iorecords.Open(iorecords.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().Truncate(time.Second)
	rec := func(job, node, path string, written, writes, stats uint64) appio.FileRecord {
		r := appio.FileRecord{Start: now.Add(-2 * time.Second).UnixNano(), End: now.Add(-time.Second).UnixNano(), Node: node, JobID: job,
			PID: 1, Rank: -1, Path: path, MountPoint: "/scratch", FSType: "lustre"}
		r.Counters[appio.BytesWritten], r.Counters[appio.Writes], r.Counters[appio.Stats] = written, writes, stats
		r.Counters[appio.WriteNS] = 1_500_000_000
		return r
	}
	if err := st.Append([]appio.FileRecord{rec("7", "cn1", "/scratch/x", 102_400_000, 100_000, 0),
		rec("8", "cn2", "/scratch/meta", 0, 0, 5_000_000), rec("", "cn3", "", 10, 1, 0)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(st.Handler(iorecords.Limits{}))
	defer srv.Close()
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"io", "top", "--server", srv.URL}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := run("--since", "1m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[1], "FILE") || !strings.HasPrefix(lines[2], "/scratch/x ") || !strings.Contains(lines[2], "97.7 MiB") ||
		!strings.Contains(lines[2], "100000") || !strings.Contains(lines[2], "1.5s") || !strings.Contains(out, "(other files)") ||
		!strings.Contains(out, "top jobs by bytes") {
		t.Errorf("table:\n%s", out)
	}
	if code, out, _ := run("--by", "calls", "--limit", "1"); code != 0 || !strings.Contains(out, "/scratch/meta") || strings.Contains(out, "/scratch/x") {
		t.Errorf("--by calls --limit 1: %d\n%s", code, out)
	}
	code, out, _ = run("--job", "7", "--json")
	var top iorecords.TopJSON
	if code != 0 || json.Unmarshal([]byte(out), &top) != nil || len(top.Files) != 1 || top.Files[0].BytesWritten != 102_400_000 ||
		top.Job == nil || *top.Job != "7" {
		t.Errorf("--job 7 --json: %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--by", "size"}, {"--since", "soon"}, {"--limit", "0"}, {"extra"}} {
		if code, _, _ := run(bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	var errb bytes.Buffer
	if code := Main(context.Background(), []string{"io", "bottom"}, &errb, &errb); code != 2 {
		t.Errorf("io bottom: exit %d", code)
	}
}
