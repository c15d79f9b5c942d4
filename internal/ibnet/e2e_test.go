package ibnet

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/ibsim"
)

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helperBinary compiles ibmad/vigil-ibmad.c once per test binary.
func helperBinary(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat("/usr/include/infiniband/ibnetdisc.h"); err != nil {
		testutil.MissingPeer(t, "libibnetdisc headers missing (libibumad-dev libibmad-dev libibnetdisc-dev)")
	}
	cc := testutil.LookPeer(t, "cc", "a C compiler")
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vigil-ibmad")
		if err != nil {
			helperErr = err
			return
		}
		helperPath = filepath.Join(dir, "vigil-ibmad")
		out, err := exec.Command(cc, "-O2", "-Wall", "-o", helperPath, "../../ibmad/vigil-ibmad.c",
			"-libnetdisc", "-libmad", "-libumad").CombinedOutput()
		if err != nil {
			helperErr = errors.New(string(out))
		}
	})
	if helperErr != nil {
		t.Fatalf("build vigil-ibmad: %v", helperErr)
	}
	return helperPath
}

// bigTree has 24×36 + 6×72 = 1,296 linked switch ports.
var bigTree = ibsim.FatTree{Leaves: 24, Spines: 6, HCAs: 18, Uplinks: 3}

// smallTree is for the change tests: 4 leaves, 2 spines.
var smallTree = ibsim.FatTree{Leaves: 4, Spines: 2, HCAs: 2, Uplinks: 1}

func find(snap *Snapshot, sw string, port int) int {
	for i, l := range snap.Links {
		if l.Switch == sw && l.Port == port {
			return i
		}
	}
	return -1
}

func TestE2ETopologyAndCounters(t *testing.T) {
	helper := helperBinary(t)
	sim := ibsim.Start(t, bigTree)
	s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, MADTimeout: time.Second, Window: 8})
	defer s.Close()
	ctx := context.Background()
	if err := s.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	leafPort := bigTree.HCAs + 2 // an uplink to spine01
	sim.Console(t, `PerformanceSet "leaf03"[`+itoa(leafPort)+`] PortCounters.PortXmitWait=12345`)
	if out := sim.Console(t, `PerformanceSet "leaf03"[1] PortCounters.SymbolErrorCounter=7`); !strings.Contains(out, "has been set") {
		t.Fatalf("ibsim: %s", out)
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	s.Read(func(snap *Snapshot) {
		if len(snap.Switches) != bigTree.Leaves+bigTree.Spines {
			t.Errorf("switches = %d, want %d", len(snap.Switches), bigTree.Leaves+bigTree.Spines)
		}
		if len(snap.Links) != bigTree.LinkedSwitchPorts() || snap.PortsSwept != bigTree.LinkedSwitchPorts() {
			t.Errorf("links %d, swept %d, want %d", len(snap.Links), snap.PortsSwept, bigTree.LinkedSwitchPorts())
		}
		levels := map[string]int{}
		for _, sw := range snap.Switches {
			levels[sw.Level]++
		}
		if levels[LevelLeaf] != bigTree.Leaves || levels[LevelSpine] != bigTree.Spines {
			t.Errorf("levels %v", levels)
		}
		i := find(snap, "leaf03", leafPort)
		if i < 0 {
			t.Fatal("leaf03 uplink not found")
		}
		l := snap.Links[i]
		// Leaf 3's second uplink goes to spine01 port (3-1)*Uplinks+2.
		if l.Remote != "spine01" || l.RemotePort != 2*bigTree.Uplinks+2 || l.RemoteType != TypeSwitch || !snap.Up[i] {
			t.Errorf("link %+v up=%v", l, snap.Up[i])
		}
		if got := snap.Totals[i][CXmitWait]; got != 12345 {
			t.Errorf("xmit wait = %d, want 12345", got)
		}
		j := find(snap, "leaf03", 1)
		if j < 0 || snap.Links[j].Remote != ibsim.HCA(2*bigTree.HCAs+1) || snap.Links[j].RemoteType != TypeCA {
			t.Fatalf("leaf03 p1: %+v", snap.Links[j])
		}
		if got := snap.Totals[j][CSymbolErrors]; got != 7 {
			t.Errorf("symbol errors = %d, want 7", got)
		}
		if snap.Totals[i][CXmitData] == 0 {
			t.Error("no data counted on a link that carried MADs")
		}
	})
	// A counter reset (set to a lower value) must not go backwards.
	sim.Console(t, `PerformanceSet "leaf03"[`+itoa(leafPort)+`] PortCounters.PortXmitWait=5`)
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	s.Read(func(snap *Snapshot) {
		if got := snap.Totals[find(snap, "leaf03", leafPort)][CXmitWait]; got != 12345+5 {
			t.Errorf("after a reset xmit wait = %d, want 12350", got)
		}
	})
}

func itoa(i int) string { return strconvItoa(i) }

func TestE2ESplitFourHosts(t *testing.T) {
	helper := helperBinary(t)
	sim := ibsim.Start(t, bigTree)
	// Sampler hosts under leaves 1, 2, 2 and 5 (two under leaf02).
	hosts := []string{ibsim.Host(1), ibsim.Host(bigTree.HCAs + 1), ibsim.Host(bigTree.HCAs + 2), ibsim.Host(4*bigTree.HCAs + 1)}
	type result struct {
		switches []SwitchInfo
		err      error
	}
	res := make([]result, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() { // one helper process per host, attached at its HCA
			defer wg.Done()
			s := New(Config{Helper: helper, Env: sim.Env(h + " HCA-1"), Dir: sim.Dir, Hosts: hosts, Host: h, MADTimeout: time.Second, Window: 1})
			defer s.Close()
			res[i].err = s.Sweep(context.Background())
			s.Read(func(snap *Snapshot) { res[i].switches = append(res[i].switches, snap.Switches...) })
		}()
	}
	wg.Wait()
	owner := map[string]string{}
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("%s: %v", hosts[i], r.err)
		}
		for _, sw := range r.switches {
			if prev, dup := owner[sw.Desc]; dup {
				t.Errorf("%s swept by %s and %s", sw.Desc, prev, hosts[i])
			}
			owner[sw.Desc] = hosts[i]
		}
	}
	if len(owner) != bigTree.Leaves+bigTree.Spines {
		t.Errorf("%d switches covered, want %d", len(owner), bigTree.Leaves+bigTree.Spines)
	}
	if owner["leaf01"] != hosts[0] || owner["leaf05"] != hosts[3] || (owner["leaf02"] != hosts[1] && owner["leaf02"] != hosts[2]) {
		t.Errorf("leaves not with the hosts below them: %v", owner)
	}
	count := map[string]int{}
	for _, h := range owner {
		count[h]++
	}
	for _, h := range hosts {
		if n := count[h]; n < 7 || n > 8 { // 30 switches over 4 hosts
			t.Errorf("%s sweeps %d switches, want 7 or 8: %v", h, n, count)
		}
	}
}

func TestE2ELinkDownUpAndGUIDChange(t *testing.T) {
	helper := helperBinary(t)
	sim := ibsim.Start(t, smallTree)
	s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, MADTimeout: time.Second, Window: 1})
	defer s.Close()
	ctx := context.Background()
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	port := smallTree.HCAs + 1 // leaf02 → spine01
	sim.Console(t, `Unlink "leaf02"[`+itoa(port)+`]`)
	s.rediscover = true // as after the 60 s timer
	s.Sweep(ctx)
	s.Read(func(snap *Snapshot) {
		i := find(snap, "leaf02", port)
		if i < 0 {
			t.Fatal("cut link forgotten")
		}
		if snap.Up[i] || snap.Links[i].Remote != "spine01" {
			t.Errorf("cut link: up=%v %+v", snap.Up[i], snap.Links[i])
		}
	})
	sim.Console(t, `ReLink "leaf02"[`+itoa(port)+`]`)
	sim.OpenSM(t)
	s.rediscover = true
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	s.Read(func(snap *Snapshot) {
		if i := find(snap, "leaf02", port); i < 0 || !snap.Up[i] {
			t.Errorf("relinked port not up")
		}
	})
	var oldGUID uint64
	s.Read(func(snap *Snapshot) { oldGUID = snap.Links[find(snap, "leaf03", 1)].SwitchGUID })
	if out := sim.Console(t, `Guid "leaf03" 0x2c9020000beef`); strings.Contains(out, "rror") {
		t.Fatalf("ibsim Guid: %s", out)
	}
	s.rediscover = true
	s.Sweep(ctx)
	s.Read(func(snap *Snapshot) {
		l := snap.Links[find(snap, "leaf03", 1)]
		if l.SwitchGUID != 0x2c9020000beef {
			t.Errorf("leaf03 GUID %#x (was %#x), want 0x2c9020000beef", l.SwitchGUID, oldGUID)
		}
	})
}

func TestE2EHelperDies(t *testing.T) {
	helper := helperBinary(t)
	sim := ibsim.Start(t, smallTree)
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, MADTimeout: 50 * time.Millisecond, Retries: 0, Window: 8, Logger: log})
	defer s.Close()
	ctx := context.Background()
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	sim.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Sweep(ctx)
		var f [NFailures]uint64
		s.Read(func(snap *Snapshot) { f = snap.Failures })
		if err != nil && f[FailHelper]+f[FailPort] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a dead ibsim was not counted: err=%v failures=%v", err, f)
		}
	}
	// Further sweeps return promptly (backoff), never block.
	start := time.Now()
	for range 3 {
		s.Sweep(ctx)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("sweeps after the helper died took %v", d)
	}
	// Let the backoff pass twice: the restart fails again, not logged again.
	for range 2 {
		time.Sleep(1100 * time.Millisecond)
		s.Sweep(ctx)
	}
	// With ibsim gone the helper lives on and its MADs fail: each kind of
	// failure is logged once, however many sweeps fail.
	msgs := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if _, rest, ok := strings.Cut(line, "msg="); ok {
			msg, _, _ := strings.Cut(rest, " err=")
			msgs[msg]++
		}
	}
	if len(msgs) == 0 {
		t.Error("nothing logged")
	}
	for m, n := range msgs {
		if n != 1 {
			t.Errorf("%s logged %d times, want once:\n%s", m, n, logs.String())
		}
	}
	var f [NFailures]uint64
	s.Read(func(snap *Snapshot) { f = snap.Failures })
	if f[FailDiscover] < 2 {
		t.Errorf("failures %v: every failed discovery counts", f)
	}
}

func strconvItoa(i int) string { return strconv.Itoa(i) }

// The helper itself killed mid-life: counted as a helper failure, and the
// next sweep after the backoff restarts it and reads the fabric again.
func TestE2EHelperKilledRestarts(t *testing.T) {
	helper := helperBinary(t)
	sim := ibsim.Start(t, smallTree)
	s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, MADTimeout: time.Second})
	defer s.Close()
	ctx := context.Background()
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	s.h.cmd.Process.Kill()
	if err := s.Sweep(ctx); !errors.Is(err, ErrHelper) {
		t.Fatalf("sweep with a dead helper: %v", err)
	}
	if err := s.Sweep(ctx); !errors.Is(err, ErrHelper) || !strings.Contains(err.Error(), "waiting") {
		t.Fatalf("sweep within the backoff: %v", err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := s.Sweep(ctx); err != nil {
		t.Fatalf("sweep after the backoff: %v", err)
	}
	s.Read(func(snap *Snapshot) {
		if snap.Failures[FailHelper] != 1 || snap.PortsSwept != smallTree.LinkedSwitchPorts() {
			t.Errorf("failures %v, swept %d", snap.Failures, snap.PortsSwept)
		}
	})
}

// A LID change (ibsim's Baselid, without the SM) is followed on the next
// discovery; the fabric has no route to the new LID yet, so the ports'
// MADs fail and are counted. The SM then gives the switch its old LID back
// (opensm's guid2lid cache): the failures trigger a re-discovery and the
// sweep follows it back without help.
func TestE2ELIDChange(t *testing.T) {
	helper := helperBinary(t)
	sim := ibsim.Start(t, smallTree)
	s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, MADTimeout: 200 * time.Millisecond, Window: 8})
	defer s.Close()
	ctx := context.Background()
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	lid := func() (l uint16) {
		s.Read(func(snap *Snapshot) { l = snap.Links[find(snap, "leaf03", 1)].LID })
		return l
	}
	old := lid()
	if out := sim.Console(t, `Baselid "leaf03"[0] 200`); strings.Contains(out, "rror") {
		t.Fatalf("ibsim Baselid: %s", out)
	}
	s.rediscover = true // as after the 60 s timer
	if err := s.Sweep(ctx); err == nil || lid() != 200 {
		t.Fatalf("after Baselid: LID %d (was %d), err %v; want 200 and unroutable ports", lid(), old, err)
	}
	s.Read(func(snap *Snapshot) {
		// After the discovery every switch's ClassPortInfo is asked again;
		// leaf03's gets no answer, so its ports are failed without MADs
		// of their own: one timeout, not one a port.
		leaf03 := smallTree.LeafPorts()
		if want := len(snap.Switches) + 5*(snap.PortsSwept-leaf03); snap.MADs != want {
			t.Errorf("%d MADs, want %d", snap.MADs, want)
		}
		if f := snap.Failures[FailPort]; f != uint64(leaf03) {
			t.Errorf("%d ports failed, want leaf03's %d", f, leaf03)
		}
	})
	sim.OpenSM(t)
	s.Sweep(ctx) // fails on LID 200: re-discovery is due
	if err := s.Sweep(ctx); err != nil || lid() != old {
		t.Errorf("after the SM: LID %d, err %v; want %d and no error", lid(), err, old)
	}
	s.Read(func(snap *Snapshot) {
		if snap.Failures[FailPort] == 0 {
			t.Error("unroutable ports not counted")
		}
	})
}

// The optional attributes against ibsim, through both helper paths:
// detail and per-VL wait counters set on ibsim's console come back on the
// right link; only the operational VLs (opensm sets VL0-7) and counted
// ones are reported; a lowered detail counter keeps its total rising.
func TestE2EDetailCounters(t *testing.T) {
	helper := helperBinary(t)
	for _, window := range []int{1, 8} {
		t.Run("window="+itoa(window), func(t *testing.T) {
			sim := ibsim.Start(t, smallTree)
			s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, MADTimeout: time.Second, Window: window})
			defer s.Close()
			ctx := context.Background()
			if err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			port := smallTree.HCAs + 1 // leaf02 → spine01
			for _, set := range []string{
				"PortXmitDiscardDetails.PortNeighborMTUDiscards=11",
				"PortXmitDiscardDetails.PortSwHOQLifetimeLimitDiscards=12",
				"PortRcvErrorDetails.PortLoopingErrors=13",
				"PortRcvErrorDetails.PortLocalPhysicalErrors=14",
				"PortVLXmitWaitCounters.PortVLXmitWaitCounters3=77",
				"PortVLXmitWaitCounters.PortVLXmitWaitCounters12=5", // not an operational VL
			} {
				if out := sim.Console(t, `PerformanceSet "leaf02"[`+itoa(port)+`] `+set); !strings.Contains(out, "has been set") {
					t.Fatalf("ibsim %s: %s", set, out)
				}
			}
			var gen uint64
			s.Read(func(snap *Snapshot) { gen = snap.TopoGen })
			if err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			s.Read(func(snap *Snapshot) {
				i := find(snap, "leaf02", port)
				if i < 0 || snap.Links[i].Remote != "spine01" {
					t.Fatalf("leaf02 p%d not found", port)
				}
				tot := snap.Totals[i]
				want := map[int]uint64{CXmitDiscardNeighborMTU: 11, CXmitDiscardSwHOQLifetimeLimit: 12, CRcvLoopingErrors: 13,
					CRcvLocalPhyErrors: 14, CVLXmitWait0 + 3: 77, CVLXmitWait0 + 12: 5, CXmitDiscardInactive: 0, CVLXmitWait0: 0}
				for k, w := range want {
					if tot[k] != w {
						t.Errorf("counter %d = %d, want %d", k, tot[k], w)
					}
				}
				if a := snap.Avail[i]; a.Groups != FlagsRead || a.VLs != 0xff|1<<12 {
					t.Errorf("avail %+v, want all groups and VLs 0-7 and 12", a)
				}
				if j := find(snap, "leaf01", port); j < 0 || snap.Avail[j].VLs != 0xff {
					t.Errorf("leaf01 avail %+v, want VLs 0-7", snap.Avail[j])
				}
				if snap.TopoGen == gen {
					t.Error("a VL newly counted did not change the series set")
				}
				if snap.Failures != [NFailures]uint64{} {
					t.Errorf("failures %v", snap.Failures)
				}
				// 5 MADs a port once the switches' ClassPortInfo is known.
				if snap.MADs != 5*snap.PortsSwept {
					t.Errorf("%d MADs for %d ports", snap.MADs, snap.PortsSwept)
				}
			})
			sim.Console(t, `PerformanceSet "leaf02"[`+itoa(port)+`] PortRcvErrorDetails.PortLoopingErrors=2`)
			if err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			s.Read(func(snap *Snapshot) {
				if got := snap.Totals[find(snap, "leaf02", port)][CRcvLoopingErrors]; got != 13+2 {
					t.Errorf("after a reset looping errors = %d, want 15", got)
				}
			})
		})
	}
}

// A switch that refuses the per-VL attribute: ibsim refuses
// PortXmitDataSL, asked in its place through the helper's test hook. The
// port is not failed, the refusal is counted once per switch (then not
// asked again until the next discovery), the details are still read and
// no VL series appear.
func TestE2EVLWaitRefused(t *testing.T) {
	helper := helperBinary(t)
	for _, window := range []int{1, 8} {
		t.Run("window="+itoa(window), func(t *testing.T) {
			sim := ibsim.Start(t, smallTree)
			s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, MADTimeout: time.Second, Window: window,
				vlAttr: 0x36}) // PortXmitDataSL
			defer s.Close()
			ctx := context.Background()
			sim.Console(t, `PerformanceSet "leaf03"[1] PortXmitDiscardDetails.PortInactiveDiscards=9`)
			if err := s.Sweep(ctx); err != nil {
				t.Fatalf("a refused optional attribute failed the sweep: %v", err)
			}
			var first uint64
			s.Read(func(snap *Snapshot) {
				first = snap.Failures[FailUnsupported]
				switches := uint64(len(snap.Switches))
				if first < switches || first > switches*uint64(window) {
					t.Errorf("unsupported = %d, want one a switch (%d) up to one a port in flight", first, switches)
				}
				if snap.Failures[FailPort] != 0 || snap.PortsSwept != smallTree.LinkedSwitchPorts() {
					t.Errorf("failures %v, swept %d", snap.Failures, snap.PortsSwept)
				}
				i := find(snap, "leaf03", 1)
				if a := snap.Avail[i]; a.Groups != FlagXmitDiscardDetails|FlagRcvErrorDetails || a.VLs != 0 {
					t.Errorf("avail %+v, want the details only", a)
				}
				if got := snap.Totals[i][CXmitDiscardInactive]; got != 9 {
					t.Errorf("inactive discards = %d, want 9", got)
				}
			})
			if err := s.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			s.Read(func(snap *Snapshot) {
				if got := snap.Failures[FailUnsupported]; got != first {
					t.Errorf("unsupported went from %d to %d: the refusal was not remembered", first, got)
				}
				if snap.MADs != 4*snap.PortsSwept {
					t.Errorf("%d MADs for %d ports, want 4 a port", snap.MADs, snap.PortsSwept)
				}
			})
			// A discovery forgets what the switches refused: asked again.
			s.rediscover = true
			s.Sweep(ctx)
			s.Read(func(snap *Snapshot) {
				if got := snap.Failures[FailUnsupported]; got <= first {
					t.Errorf("unsupported %d after a re-discovery, want more than %d", got, first)
				}
			})
		})
	}
}
