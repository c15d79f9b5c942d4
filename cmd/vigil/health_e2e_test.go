package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
)

// TestE2EHealthSamplerToServer runs a real sampler with the health plugin
// (a script check that fails while a flag file exists) streaming into a
// real server: the failure shows in GET /api/v1/health with the script's
// first line as its reason, as vigil_health_check_ok 0, and as one
// health_fail event; removing the flag file passes the check, clears the
// API and adds a health_pass event.
func TestE2EHealthSamplerToServer(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	dir := t.TempDir()
	flag := filepath.Join(dir, "bad")
	script := filepath.Join(dir, "check.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nif [ -e "+flag+" ]; then echo \"scratch: read-only file system\"; echo more; exit 1; fi\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "vigil.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[plugins.health]\ninterval = \"1s\"\nreport_interval = \"1s\"\ntimeout = \"5s\"\n\n[[plugins.health.check]]\nname = \"scratch_rw\"\ntype = \"script\"\npath = %q\n", script)), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr, wireAddr := freePort(t), freePort(t)
	srv := "http://" + httpAddr
	start(t, "server", "server", "--http", httpAddr, "--listen", wireAddr, "--data", t.TempDir(), "--interval", "1s", "--disable-rollups")
	waitFor(t, 15*time.Second, "the server", func() bool { _, err := http.Get(srv + "/-/ready"); return err == nil })
	start(t, "sampler", "sampler", "--config", cfg, "--root", "/", "--plugins", "health,load", "--interval", "1s",
		"--listen", "none", "--upstream", wireAddr, "--node", "hc1")

	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(srv + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	type failing struct{ Check, Reason string }
	health := func() []failing {
		var v struct {
			Data struct{ Nodes map[string][]failing }
		}
		getJSON("/api/v1/health", &v)
		return v.Data.Nodes["hc1"]
	}
	kinds := func() string {
		var v struct {
			Data struct{ Events []events.Event }
		}
		getJSON("/api/v1/events?node=hc1&kind=health_fail,health_pass", &v)
		var ks []string
		for i := len(v.Data.Events) - 1; i >= 0; i-- { // oldest first
			e := v.Data.Events[i]
			ks = append(ks, e.Kind+":"+e.Labels["check"])
		}
		return strings.Join(ks, " ")
	}
	okValue := func() string {
		var v struct {
			Data struct {
				Result []struct{ Value [2]any }
			}
		}
		getJSON("/api/v1/query?query="+url.QueryEscape(`vigil_health_check_ok{node="hc1",check="scratch_rw"}`), &v)
		if len(v.Data.Result) != 1 {
			return ""
		}
		return fmt.Sprint(v.Data.Result[0].Value[1])
	}
	waitFor(t, 20*time.Second, "the check passing at the server", func() bool { return okValue() == "1" })
	if got := health(); len(got) != 0 {
		t.Fatalf("failing before the flag file: %+v", got)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the failure in /api/v1/health", func() bool { return len(health()) == 1 })
	if got := health(); got[0].Check != "scratch_rw" || got[0].Reason != "scratch: read-only file system" {
		t.Fatalf("failing checks %+v, want scratch_rw with the script's first line", got)
	}
	waitFor(t, 10*time.Second, "vigil_health_check_ok 0", func() bool { return okValue() == "0" })
	waitFor(t, 10*time.Second, "a health_fail event", func() bool { return kinds() == "health_fail:scratch_rw" })
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the check passing again", func() bool { return len(health()) == 0 && okValue() == "1" })
	waitFor(t, 10*time.Second, "a health_pass event", func() bool { return kinds() == "health_fail:scratch_rw health_pass:scratch_rw" })
}
