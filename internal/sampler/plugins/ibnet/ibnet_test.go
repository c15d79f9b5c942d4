package ibnet

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/ibsim"
)

func buildHelper(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/include/infiniband/ibnetdisc.h"); err != nil {
		testutil.MissingPeer(t, "libibnetdisc headers missing (libibumad-dev libibmad-dev libibnetdisc-dev)")
	}
	cc := testutil.LookPeer(t, "cc", "a C compiler")
	out := filepath.Join(t.TempDir(), "vigil-ibmad")
	if b, err := exec.Command(cc, "-O2", "-o", out, "../../../../ibmad/vigil-ibmad.c", "-libnetdisc", "-libmad", "-libumad").CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v: %s", err, b)
	}
	return out
}

func series(b *metric.Batch) map[string]float64 {
	m := map[string]float64{}
	for i, d := range b.Descs {
		m[string(metric.AppendSeries(nil, d, nil))] = b.Values[i]
	}
	return m
}

// The plugin on one of 4 sampler hosts: it sweeps only its share, the
// tick copies the sweep (0 allocs), counters set in ibsim appear with the
// right link labels.
func TestE2EPlugin(t *testing.T) {
	helper := buildHelper(t)
	tree := ibsim.FatTree{Leaves: 4, Spines: 2, HCAs: 2, Uplinks: 1}
	sim := ibsim.Start(t, tree)
	t.Chdir(sim.Dir) // the shim writes a fake sysfs (sys-PID/) into the helper's working directory
	for _, kv := range sim.Env("") {
		if k, v, _ := strings.Cut(kv, "="); k == "LD_PRELOAD" || k == "IBSIM_SOCKNAME" {
			t.Setenv(k, v) // the plugin's helper inherits them
		}
	}
	for _, set := range []string{"PortCounters.PortXmitWait=4242", "PortRcvErrorDetails.PortLoopingErrors=13",
		"PortXmitDiscardDetails.PortNeighborMTUDiscards=11", "PortVLXmitWaitCounters.PortVLXmitWaitCounters3=77",
		"PortVLXmitWaitCounters.PortVLXmitWaitCounters12=5"} {
		if out := sim.Console(t, `PerformanceSet "leaf03"[3] `+set); !strings.Contains(out, "has been set") {
			t.Fatalf("ibsim %s: %s", set, out)
		}
	}
	cfg := DefaultConfig()
	cfg.Helper = helper
	// cn005 sits below leaf03; 4 hosts share 6 switches.
	cfg.Samplers = []string{ibsim.Host(1), ibsim.Host(3), ibsim.Host(5), ibsim.Host(7)}
	cfg.Host = ibsim.Host(5)
	cfg.SweepInterval = sampler.Duration(200 * time.Millisecond)
	cfg.SweepOffset = 0
	cfg.MADTimeout = sampler.Duration(time.Second)
	p := New(cfg)
	if err := p.Init(sampler.Env{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var b metric.Batch
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.Reset(time.Now())
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		if p.snap.SweepGen >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sweep in 10 s: %v", series(&b))
		}
		time.Sleep(50 * time.Millisecond)
	}
	m := series(&b)
	var wait, info, switches int
	vls := map[string]int{} // VL series per link
	leaf03p3 := func(k string) bool {
		return strings.Contains(k, `switch="leaf03"`) && strings.Contains(k, `,port="3",`)
	}
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "vigil_ib_port_vl_transmit_wait_total{"):
			link, _, _ := strings.Cut(k, `,vl=`)
			vls[link]++
			if leaf03p3(k) {
				want := map[string]float64{`vl="3"`: 77, `vl="12"`: 5}[k[strings.Index(k, "vl="):len(k)-1]]
				if v != want {
					t.Errorf("%s = %v, want %v", k, v, want)
				}
			}
		case strings.HasPrefix(k, "vigil_ib_port_receive_looping_errors_total{") && leaf03p3(k):
			if v != 13 || !strings.Contains(k, `remote="spine01"`) {
				t.Errorf("%s = %v, want 13", k, v)
			}
		case strings.HasPrefix(k, "vigil_ib_port_transmit_discards_neighbor_mtu_total{") && leaf03p3(k):
			if v != 11 {
				t.Errorf("%s = %v, want 11", k, v)
			}
		case strings.HasPrefix(k, "vigil_ib_port_transmit_wait_total{"):
			if strings.Contains(k, `switch="leaf03"`) && strings.Contains(k, `,port="3",`) {
				if !strings.Contains(k, `remote="spine01"`) || !strings.Contains(k, `remote_port="3"`) || !strings.Contains(k, `remote_type="switch"`) {
					t.Errorf("labels: %s", k)
				}
				if v != 4242 {
					t.Errorf("%s = %v, want 4242", k, v)
				}
				wait++
			}
		case strings.HasPrefix(k, "vigil_ib_port_info{"):
			info++
			if !strings.Contains(k, `rate="10 Gb/s"`) || !strings.Contains(k, `width="4x"`) || !strings.Contains(k, `speed="SDR"`) {
				t.Errorf("info: %s", k)
			}
		case strings.HasPrefix(k, "vigil_ib_switch_info{"):
			switches++
			if strings.Contains(k, `switch="leaf03"`) && !strings.Contains(k, `level="leaf"`) {
				t.Errorf("switch info: %s", k)
			}
		}
	}
	if wait != 1 {
		t.Errorf("leaf03 p3 transmit wait series: %d", wait)
	}
	// opensm makes VL0-7 operational: 8 VL series a link, 9 where VL12
	// counted too.
	if len(vls) != info {
		t.Errorf("VL series on %d links, want all %d", len(vls), info)
	}
	for link, n := range vls {
		if want := map[bool]int{false: 8, true: 9}[leaf03p3(link+",")]; n != want {
			t.Errorf("%s: %d VL series, want %d", link, n, want)
		}
	}
	for _, name := range []string{"vigil_ib_port_transmit_discards_inactive_total", "vigil_ib_port_transmit_discards_sw_lifetime_limit_total",
		"vigil_ib_port_receive_local_phy_errors_total", "vigil_ib_port_receive_malformed_packet_errors_total",
		"vigil_ib_port_receive_buffer_overrun_errors_total", "vigil_ib_port_receive_dlid_mapping_errors_total",
		"vigil_ib_port_receive_vl_mapping_errors_total", "vigil_ib_port_transmit_discards_sw_hoq_lifetime_limit_total"} {
		n := 0
		for k := range m {
			if strings.HasPrefix(k, name+"{") {
				n++
			}
		}
		if n != info {
			t.Errorf("%s: %d series, want one a link (%d)", name, n, info)
		}
	}
	if v, ok := m[`vigil_ibnet_sweep_failures_total{reason="unsupported"}`]; !ok || v != 0 {
		t.Errorf("unsupported failures: %v %v", v, ok)
	}
	// cn005's share: leaf03 and at most one more of 6 switches.
	if switches < 1 || switches > 2 || m["vigil_ibnet_switches_assigned"] != float64(switches) {
		t.Errorf("switches swept %d, assigned %v", switches, m["vigil_ibnet_switches_assigned"])
	}
	if info == 0 || m["vigil_ibnet_ports_swept"] != float64(info) {
		t.Errorf("info series %d, ports swept %v", info, m["vigil_ibnet_ports_swept"])
	}
	allocs := testing.AllocsPerRun(50, func() {
		b.Reset(time.Now())
		p.Sample(context.Background(), time.Now(), &b)
	})
	if allocs != 0 {
		t.Errorf("allocs per tick = %v, want 0", allocs)
	}
}

func TestParseHosts(t *testing.T) {
	hs, err := ParseHosts([]byte("# samplers\ncn001\n\n  cn145 # rack 2\n"))
	if err != nil || len(hs) != 2 || hs[0] != "cn001" || hs[1] != "cn145" {
		t.Fatalf("%v %v", hs, err)
	}
	if _, err := ParseHosts([]byte("cn001 cn002\n")); err == nil {
		t.Error("two names on a line accepted")
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.SweepOffset = c.SweepInterval
	if err := c.Validate(); err == nil {
		t.Error("offset = interval accepted")
	}
}
