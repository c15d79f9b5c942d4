package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

func jobServer(t *testing.T) string {
	t.Helper()
	m, err := jobs.New(jobs.Options{Dir: t.TempDir(), Events: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.Local)
	for _, j := range []*jobs.Job{
		{ID: "101", User: "alice", Partition: "batch", Nodes: []string{"cn1", "cn2", "cn3", "cn4"}, State: jobs.StateCompleted,
			Start: start, End: start.Add(26*time.Hour + 3*time.Minute + 4*time.Second)},
		{ID: "102", User: "bob\tx", Partition: "gpu", State: jobs.StatePending},
	} {
		if err := m.Index().Upsert(j); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	m.Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestJobCommand(t *testing.T) {
	srv := jobServer(t)
	table := "ID   USER    PARTITION  STATE      NODES         START                ELAPSED\n" +
		"102  bob\\tx  gpu        pending    -             -                    -\n" +
		"101  alice   batch      completed  cn1,cn2,…(4)  2026-11-25 10:00:00  1-02:03:04\n"
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"list", []string{"list", "--server", srv}, 0, table},
		{"list user", []string{"list", "--server", srv, "--user", "alice", "--state", "ended", "--since", "400d"}, 0,
			"ID   USER   PARTITION  STATE      NODES         START                ELAPSED\n" +
				"101  alice  batch      completed  cn1,cn2,…(4)  2026-11-25 10:00:00  1-02:03:04\n"},
		{"list none", []string{"list", "--server", srv, "--user", "carol"}, 0, "ID  USER  PARTITION  STATE  NODES  START  ELAPSED\n"},
		{"bad since", []string{"list", "--server", srv, "--since", "yesterday"}, 2, ""},
		{"bad limit", []string{"list", "--server", srv, "--limit", "1000000"}, 2, ""},
		{"no such job", []string{"show", "999", "--server", srv}, 1, ""},
		{"bad job id", []string{"show", "--server", srv, "1;2"}, 2, ""},
		{"report dispatched", []string{"report", "101", "--server", srv}, 1, ""}, // this fake serves no reports: 404
		{"no subcommand", nil, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"job"}, tc.args...), &out, &errb)
			if code != tc.code || out.String() != tc.want {
				t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit %d, stdout:\n%s", code, out.String(), errb.String(), tc.code, tc.want)
			}
			if tc.name == "no such job" && !strings.Contains(errb.String(), "no such job: 999") {
				t.Errorf("stderr %q does not say no such job", errb.String())
			}
		})
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"job", "list", "--json", "--server", srv, "--state", "pending"}, &out, &errb); code != 0 {
		t.Fatalf("list --json: exit %d: %s", code, errb.String())
	}
	var got []jobs.Job
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 || got[0].ID != "102" || got[0].User != "bob\tx" {
		t.Fatalf("list --json: %s (%v)", out.String(), err)
	}
}

// TestJobEventCommand posts a prolog's start and an epilog's end from
// Slurm's variables; a server that is away does not fail the prolog
// unless --strict.
func TestJobEventCommand(t *testing.T) {
	srv := jobServer(t)
	t.Setenv("SLURM_JOB_ID", "555")
	t.Setenv("SLURM_JOB_USER", "dave")
	t.Setenv("SLURM_JOB_PARTITION", "long")
	t.Setenv("SLURM_JOB_NODELIST", "cn[1-2]")
	t.Setenv("SLURM_JOB_CPUS_PER_NODE", "8(x2)")
	t.Setenv("SLURM_JOB_START_TIME", "1790000000")
	t.Setenv("SLURM_JOB_END_TIME", "1790003600")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"job-event", "start", "--server", srv}, &out, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("job-event start: exit %d: %s", code, errb.String())
	}
	t.Setenv("SLURM_JOB_EXIT_CODE", "256") // exit(1)
	if code := Main(context.Background(), []string{"job-event", "end", "--server", srv}, &out, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("job-event end: exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := Main(context.Background(), []string{"job", "show", "555", "--server", srv}, &out, &errb); code != 0 {
		t.Fatalf("job show: exit %d: %s", code, errb.String())
	}
	var j jobs.Job
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.User != "dave" || j.Partition != "long" || strings.Join(j.Nodes, ",") != "cn1,cn2" || j.State != jobs.StateFailed ||
		j.ExitCode != 1 || j.Start.IsZero() || j.End.Before(j.Start) || j.CPUs != 16 || time.Duration(j.TimeLimit) != time.Hour {
		t.Fatalf("job 555 after its events: %+v", j)
	}
	away := "http://" + freeAddr(t)
	errb.Reset()
	if code := Main(context.Background(), []string{"job-event", "end", "--server", away, "--timeout", "2s"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "not told") {
		t.Fatalf("job-event to a server away: exit %d, %q; want 0 and a warning", code, errb.String())
	}
	if code := Main(context.Background(), []string{"job-event", "end", "--strict", "--server", away, "--timeout", "2s"}, &out, &errb); code != 1 {
		t.Fatalf("job-event --strict to a server away: exit %d, want 1", code)
	}
	t.Setenv("SLURM_JOB_ID", "")
	if code := Main(context.Background(), []string{"job-event", "end", "--server", srv}, &out, &errb); code != 2 {
		t.Fatalf("job-event without SLURM_JOB_ID: exit %d, want 2", code)
	}
}

func TestCPUsPerNode(t *testing.T) {
	for in, want := range map[string]int{"4": 4, "4(x2),2": 10, "64(x1000)": 64000, "1,2,3": 6} {
		if got, ok := cpusPerNode(in); !ok || got != want {
			t.Errorf("cpusPerNode(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "x", "4(2)", "4(x)", "4(x2", "-1", "4(x0)", "99999999(x99999999)"} {
		if got, ok := cpusPerNode(in); ok {
			t.Errorf("cpusPerNode(%q) = %d, want refused", in, got)
		}
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
