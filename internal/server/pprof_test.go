package server

import (
	"io"
	"net/http"
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Profiles are served only with --debug-pprof, and behind the web config.
func TestDebugPprof(t *testing.T) {
	get := func(c *http.Client, url, user, pass string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	// A gzipped protobuf profile, not the dashboard's index page.
	isProfile := func(b []byte) bool { return len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b }

	_, off := startServer(t)
	if code, b := get(http.DefaultClient, off+"/debug/pprof/heap", "", ""); code == http.StatusOK && isProfile(b) {
		t.Fatal("heap profile served without --debug-pprof")
	}

	file, client := testutil.WebConfig(t, "admin", "s3cret", false)
	_, on, _ := startServerStream(t, false, func(c *Config) { c.DebugPprof, c.WebConfig = true, file })
	if code, _ := get(client, on+"/debug/pprof/heap", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("heap profile without credentials = %d, want 401", code)
	}
	if code, b := get(client, on+"/debug/pprof/heap", "admin", "s3cret"); code != http.StatusOK || !isProfile(b) {
		t.Fatalf("heap profile with --debug-pprof = %d, %d bytes (%q...), want 200 and a gzipped profile", code, len(b), b[:min(len(b), 40)])
	}
}

func TestDebugPprofFlag(t *testing.T) {
	if cfg, err := parseFlags([]string{"--debug-pprof"}); err != nil || !cfg.DebugPprof {
		t.Fatalf("--debug-pprof did not set DebugPprof: %v", err)
	}
}
