// Package ibsim runs a private InfiniBand fabric simulator for tests:
// ibsim (Debian's ibsim-utils) on a generated net file, with its console
// on a pipe the harness holds, its socket name private (IBSIM_SOCKNAME),
// and opensm run through the umad2sim shim to assign LIDs. See
// docs/fabric.md for the recipe this automates.
package ibsim

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Shim is the LD_PRELOAD library that connects libibumad programs to ibsim.
const Shim = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"

// FatTree is a two-level fat tree: Leaves leaf switches with HCAs hosts
// each (named cn001 HCA-1, …, numbered across leaves), Spines spines, and
// Uplinks cables between every leaf and every spine.
type FatTree struct {
	Leaves, Spines, HCAs, Uplinks int
}

// LeafPorts and SpinePorts are the switches' port counts.
func (f FatTree) LeafPorts() int  { return f.HCAs + f.Spines*f.Uplinks }
func (f FatTree) SpinePorts() int { return f.Leaves * f.Uplinks }

// LinkedSwitchPorts counts switch ports with a cable.
func (f FatTree) LinkedSwitchPorts() int {
	return f.Leaves*f.LeafPorts() + f.Spines*f.SpinePorts()
}

// Leaf, Spine and Host name the nodes (1-based).
func Leaf(i int) string  { return fmt.Sprintf("leaf%02d", i) }
func Spine(i int) string { return fmt.Sprintf("spine%02d", i) }
func Host(i int) string  { return fmt.Sprintf("cn%03d", i) }

// HCA is the node description of host i's adapter.
func HCA(i int) string { return Host(i) + " HCA-1" }

// NetFile renders the topology in ibsim's format. Leaf l's port h (1..HCAs)
// goes to an HCA; its port HCAs+(s-1)*Uplinks+u to spine s's port
// (l-1)*Uplinks+u.
func (f FatTree) NetFile() string {
	var b strings.Builder
	for l := 1; l <= f.Leaves; l++ {
		fmt.Fprintf(&b, "Switch %d %q\n", f.LeafPorts(), Leaf(l))
		for h := 1; h <= f.HCAs; h++ {
			fmt.Fprintf(&b, "[%d] %q[1]\n", h, HCA((l-1)*f.HCAs+h))
		}
		for s := 1; s <= f.Spines; s++ {
			for u := 1; u <= f.Uplinks; u++ {
				fmt.Fprintf(&b, "[%d] %q[%d]\n", f.HCAs+(s-1)*f.Uplinks+u, Spine(s), (l-1)*f.Uplinks+u)
			}
		}
		b.WriteString("\n")
	}
	for s := 1; s <= f.Spines; s++ {
		fmt.Fprintf(&b, "Switch %d %q\n", f.SpinePorts(), Spine(s))
		for l := 1; l <= f.Leaves; l++ {
			for u := 1; u <= f.Uplinks; u++ {
				fmt.Fprintf(&b, "[%d] %q[%d]\n", (l-1)*f.Uplinks+u, Leaf(l), f.HCAs+(s-1)*f.Uplinks+u)
			}
		}
		b.WriteString("\n")
	}
	for l := 1; l <= f.Leaves; l++ {
		for h := 1; h <= f.HCAs; h++ {
			fmt.Fprintf(&b, "Hca 1 %q\n[1] %q[%d]\n\n", HCA((l-1)*f.HCAs+h), Leaf(l), h)
		}
	}
	return b.String()
}

// Sim is a running ibsim.
type Sim struct {
	Dir  string
	Sock string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *syncBuffer
	mu   sync.Mutex
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs ibsim on f and opensm once over it; it skips (or fails under
// VIGIL_REQUIRE_E2E=1) without ibsim, opensm or the shim.
func Start(t testing.TB, f FatTree) *Sim {
	t.Helper()
	bin := testutil.LookPeer(t, "ibsim", "Debian package ibsim-utils")
	testutil.LookPeer(t, "opensm", "Debian package opensm")
	if _, err := os.Stat(Shim); err != nil {
		testutil.MissingPeer(t, "%s missing (Debian package ibsim-utils)", Shim)
	}
	dir := t.TempDir()
	net := filepath.Join(dir, "net")
	if err := os.WriteFile(net, []byte(f.NetFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Sim{Dir: dir, Sock: fmt.Sprintf("vigil-ibsim-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9), out: &syncBuffer{}, done: make(chan struct{})}
	cmd := exec.Command(bin, "-s", net)
	cmd.Env = append(os.Environ(), "IBSIM_SOCKNAME="+s.Sock)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ibsim: %v", err)
	}
	s.cmd, s.in = cmd, in
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.Kill() })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.out.String(), "sim>") {
		if time.Now().After(deadline) {
			t.Fatalf("ibsim did not start: %s", s.out.String())
		}
		select {
		case <-s.done:
			t.Fatalf("ibsim exited: %s", s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.OpenSM(t)
	return s
}

// Env is the environment for a libibumad program attached at simHost
// (a node id of the net file; "" = the first node).
func (s *Sim) Env(simHost string) []string {
	env := append(os.Environ(), "LD_PRELOAD="+Shim, "IBSIM_SOCKNAME="+s.Sock,
		"OSM_TMP_DIR="+s.Dir, "OSM_CACHE_DIR="+s.Dir)
	if simHost != "" {
		env = append(env, "SIM_HOST="+simHost)
	}
	return env
}

// OpenSM runs one opensm sweep (assigns LIDs, brings links to active).
func (s *Sim) OpenSM(t testing.TB) {
	t.Helper()
	cmd := exec.Command("opensm", "-f", filepath.Join(s.Dir, "osm.log"), "-o")
	cmd.Env = s.Env("")
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("opensm: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("opensm: %v: %s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("opensm did not finish in 60 s: %s", out.String())
	}
}

// Console sends one command to ibsim's console and returns its answer
// (what ibsim printed up to its next prompt).
func (s *Sim) Console(t testing.TB, command string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	before := len(s.out.String())
	if _, err := io.WriteString(s.in, command+"\n"); err != nil {
		t.Fatalf("ibsim console: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := s.out.String()[before:]
		if strings.Contains(out, "sim>") {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("ibsim console: no answer to %q: %s", command, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill ends ibsim (idempotent).
func (s *Sim) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.in.Close()
}
