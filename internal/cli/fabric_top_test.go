package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/fabric"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/store"
)

// fabricServer stores 90 s of the simulated fabric of 40 nodes (3 leaves,
// 2 spines) as its sweepers send it, with a job on cn00001..2, and serves
// the fabric API over them.
func fabricServer(t *testing.T) string {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Job: "node", MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	idx, err := jobs.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	if err := idx.Upsert(&jobs.Job{ID: "7", User: "alice", Nodes: []string{"cn00001", "cn00002"}, State: jobs.StateRunning}); err != nil {
		t.Fatal(err)
	}
	f, err := simulate.NewFabric(simulate.FabricOptions{Nodes: 40, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	var b metric.Batch
	for i := range 40 {
		sw := f.Sweeper(i)
		if sw == nil {
			continue
		}
		for ts := now.Add(-90 * time.Second); !ts.After(now); ts = ts.Add(time.Second) {
			b.Reset(ts)
			sw.Sample(ts, time.Second, &b)
			if err := st.AppendTick(simulate.NodeName(1+i), ts, b.Descs, b.Values, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	mux := http.NewServeMux()
	fabric.New(fabric.Options{Query: query.New(st, query.Options{}), Jobs: idx, Now: func() time.Time { return now }}).Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestFabricTopCommand(t *testing.T) {
	srv := fabricServer(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	if err := runFabric(ctx, []string{"top", "--server", srv, "--by", "bytes", "--limit", "5", "--json"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var top fabric.Top
	if err := json.Unmarshal(out.Bytes(), &top); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// 40 CA ports, 3 leaves × 2 spines links seen from both ends.
	if len(top.Links) != 5 || top.Total != 52 || top.By != "bytes" {
		t.Fatalf("%d links of %d by %q, want 5 of 52 by bytes", len(top.Links), top.Total, top.By)
	}
	for i, l := range top.Links {
		if i > 0 && l.Value > top.Links[i-1].Value {
			t.Fatalf("not worst first: %v", top.Links)
		}
		if l.Value <= 0 || l.Value != l.TxBytes+l.RxBytes {
			t.Fatalf("%s: value %g, tx+rx %g", l.Name, l.Value, l.TxBytes+l.RxBytes)
		}
	}
	// The table: a header, one line per link, a footer; job 7 (on
	// leaf01's first two nodes) under leaf01's up-links.
	out.Reset()
	if err := runFabric(ctx, []string{"top", "--server", srv, "--job", "7", "--limit", "100"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasPrefix(lines[0], "LINK ") || !strings.Contains(lines[len(lines)-1], "by xmit_wait over 1m") {
		t.Fatalf("table:\n%s", out.String())
	}
	// Its 2 CA ports, leaf01's 2 up-links and the spines' 2 down-links.
	rows := lines[1 : len(lines)-1]
	if len(rows) != 6 {
		t.Fatalf("%d links of job 7, want 6:\n%s", len(rows), out.String())
	}
	name := regexp.MustCompile(`^(leaf01 p(1|2|19|20) → |spine0[12] p1 → leaf01 )`)
	for _, r := range rows {
		if !name.MatchString(r) || !strings.Contains(r, "7(alice)") {
			t.Errorf("row not job 7's link: %q", r)
		}
	}
	errb.Reset()
	if err := runFabric(ctx, []string{"--help"}, &out, &errb); err != nil || !strings.Contains(errb.String(), "usage: vigil fabric SUBCOMMAND") || !strings.Contains(errb.String(), "  top ") {
		t.Errorf("vigil fabric --help: %v, %q", err, errb.String())
	}
	for _, bad := range [][]string{{"top", "--by", "latency"}, {"top", "--limit", "0"}, {"top", "--window", "1ms"}, {"nosuch"}, {}} {
		err := runFabric(ctx, append(bad, "--server", srv), &out, &errb)
		if exitCode(err) != 2 {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}
