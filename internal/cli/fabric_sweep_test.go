package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/ibsim"
)

// `vigil fabric sweep --once --json` under ibsim's shim: one record per
// linked switch port, with both ends and the counters set in ibsim.
func TestE2EFabricSweepOnce(t *testing.T) {
	if _, err := os.Stat("/usr/include/infiniband/ibnetdisc.h"); err != nil {
		testutil.MissingPeer(t, "libibnetdisc headers missing (libibumad-dev libibmad-dev libibnetdisc-dev)")
	}
	cc := testutil.LookPeer(t, "cc", "a C compiler")
	helper := filepath.Join(t.TempDir(), "vigil-ibmad")
	if b, err := exec.Command(cc, "-O2", "-o", helper, "../../ibmad/vigil-ibmad.c", "-libnetdisc", "-libmad", "-libumad").CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v: %s", err, b)
	}
	tree := ibsim.FatTree{Leaves: 4, Spines: 2, HCAs: 3, Uplinks: 2}
	sim := ibsim.Start(t, tree)
	t.Chdir(sim.Dir) // the shim writes a fake sysfs (sys-PID/) into the helper's working directory
	for _, kv := range sim.Env("") {
		if k, v, _ := strings.Cut(kv, "="); k == "LD_PRELOAD" || k == "IBSIM_SOCKNAME" {
			t.Setenv(k, v)
		}
	}
	sim.Console(t, `PerformanceSet "spine02"[3] PortCounters.PortXmitDiscards=9`)
	sim.Console(t, `PerformanceSet "spine02"[3] PortXmitDiscardDetails.PortSwLifetimeLimitDiscards=6`)
	var out, errOut bytes.Buffer
	if err := runFabric(context.Background(), []string{"sweep", "--once", "--json", "--helper", helper, "--mad-timeout", "1s"}, &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	var res struct {
		SweepSeconds float64 `json:"sweep_seconds"`
		Links        []sweepRecord
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Links) != tree.LinkedSwitchPorts() || res.SweepSeconds <= 0 {
		t.Fatalf("%d links in %v s, want %d", len(res.Links), res.SweepSeconds, tree.LinkedSwitchPorts())
	}
	found := false
	for _, r := range res.Links {
		if r.Switch == "spine02" && r.Port == 3 {
			found = true
			// spine02 port 3 = leaf02's first uplink to spine02: port HCAs+Uplinks+1.
			if r.Remote != "leaf02" || r.RemotePort != tree.HCAs+tree.Uplinks+1 || r.Counters["xmit_discards"] != 9 || r.State != "active" || r.Level != "spine" {
				t.Errorf("record %+v", r)
			}
			// The details, and the operational VLs' waits (VL0-7) only.
			_, vl7 := r.Counters["vl_xmit_wait_7"]
			_, vl8 := r.Counters["vl_xmit_wait_8"]
			if r.Counters["xmit_discards_sw_lifetime_limit"] != 6 || !vl7 || vl8 {
				t.Errorf("details: %v", r.Counters)
			}
		}
	}
	if !found {
		t.Error("spine02 port 3 missing")
	}
	// Without --once it is a usage error.
	if err := runFabric(context.Background(), []string{"sweep"}, &out, &errOut); err == nil {
		t.Error("sweep without --once accepted")
	}
}

// The ibnet plugin in a real sampler streaming to a real server: a counter
// set in ibsim's console is in the server's store under the link's names.
func TestE2EFabricIntoStore(t *testing.T) {
	if _, err := os.Stat("/usr/include/infiniband/ibnetdisc.h"); err != nil {
		testutil.MissingPeer(t, "libibnetdisc headers missing (libibumad-dev libibmad-dev libibnetdisc-dev)")
	}
	cc := testutil.LookPeer(t, "cc", "a C compiler")
	dir := t.TempDir()
	helper := filepath.Join(dir, "vigil-ibmad")
	if b, err := exec.Command(cc, "-O2", "-o", helper, "../../ibmad/vigil-ibmad.c", "-libnetdisc", "-libmad", "-libumad").CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v: %s", err, b)
	}
	tree := ibsim.FatTree{Leaves: 4, Spines: 2, HCAs: 2, Uplinks: 1}
	sim := ibsim.Start(t, tree)
	t.Chdir(sim.Dir) // the shim writes a fake sysfs (sys-PID/) into the helper's working directory
	for _, kv := range sim.Env("") {
		if k, v, _ := strings.Cut(kv, "="); k == "LD_PRELOAD" || k == "IBSIM_SOCKNAME" {
			t.Setenv(k, v)
		}
	}
	sim.Console(t, `PerformanceSet "leaf04"[3] PortCounters.PortXmitWait=31337`)
	httpAddr, err := loopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	wireAddr, err := loopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "vigil.toml")
	if err := os.WriteFile(conf, []byte(`[sampler]
node = "cn001"
interval = "200ms"
listen = "none"
plugins = ["ibnet"]
upstream = ["`+wireAddr+`"]

[plugins.ibnet]
helper = "`+helper+`"
sweep_interval = "200ms"
sweep_offset = "50ms"
mad_timeout = "1s"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srvDone, smpDone := make(chan error, 1), make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		<-smpDone
		<-srvDone
	})
	go func() {
		srvDone <- runServer(ctx, []string{"--http", httpAddr, "--listen", wireAddr, "--data", filepath.Join(dir, "data"),
			"--interval", "200ms", "--log-level", "error"}, io.Discard, io.Discard)
	}()
	if err := waitListening(ctx, httpAddr); err != nil {
		smpDone <- nil
		t.Fatal(err)
	}
	var logs bytes.Buffer
	go func() {
		smpDone <- runSamplerHere(ctx, []string{"--config", conf, "--log-level", "error"}, io.Discard, &syncWriter{w: &logs})
	}()
	q := `vigil_ib_port_transmit_wait_total{switch="leaf04",port="3"}`
	deadline := time.Now().Add(15 * time.Second)
	for {
		var res struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		getJSON(t, "http://"+httpAddr+"/api/v1/query?query="+url.QueryEscape(q), &res)
		if len(res.Result) == 1 && res.Result[0].Value[1] == "31337" {
			m := res.Result[0].Metric
			if m["node"] != "cn001" || m["remote"] != "spine01" || m["remote_port"] != "4" || m["remote_type"] != "switch" || m["switch_guid"] == "" {
				t.Errorf("labels %v", m)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not in the store after 15 s: %+v; sampler log: %s", q, res.Result, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
