package health

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "check.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runCfg compiles one check and runs it with its timeout, as the runner does.
func runCfg(t *testing.T, c CheckConfig) (outcome, time.Duration) {
	t.Helper()
	cs, err := Compile([]CheckConfig{c}, time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cs[0].Timeout)
	defer cancel()
	start := time.Now()
	o := cs[0].run(ctx, &env{})
	return o, time.Since(start)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// pids reads the pids a test script wrote, one a line.
func pids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %q", b)
		}
		out = append(out, n)
	}
	return out
}

func waitGone(t *testing.T, ps []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range ps {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestScriptPassFail(t *testing.T) {
	o, _ := runCfg(t, CheckConfig{Name: "s", Type: "script", Path: script(t, `exit 0`)})
	if !o.ok {
		t.Fatalf("exit 0: %+v", o)
	}
	o, _ = runCfg(t, CheckConfig{Name: "s", Type: "script", Path: script(t, `echo "ERROR: /scratch degraded"; echo more; exit 1`)})
	if o.ok || o.reason != "ERROR: /scratch degraded" || o.timedOut {
		t.Fatalf("exit 1: %+v", o)
	}
	o, _ = runCfg(t, CheckConfig{Name: "s", Type: "script", Path: script(t, `echo "$1-$2" >&2; exit 2`), Args: []string{"a", "b c"}})
	if o.ok || o.reason != "a-b c" {
		t.Fatalf("stderr, args: %+v", o)
	}
	o, _ = runCfg(t, CheckConfig{Name: "s", Type: "script", Path: script(t, `exit 7`)})
	if o.ok || o.reason != "exit status 7" {
		t.Fatalf("silent failure: %+v", o)
	}
	o, _ = runCfg(t, CheckConfig{Name: "s", Type: "script", Path: "/nonexistent/check.sh"})
	if o.ok || !strings.Contains(o.reason, "start /nonexistent/check.sh") {
		t.Fatalf("missing script: %+v", o)
	}
}

func TestCommand(t *testing.T) {
	o, _ := runCfg(t, CheckConfig{Name: "c", Type: "command", Command: []string{"true"}})
	if !o.ok {
		t.Fatalf("true: %+v", o)
	}
	o, _ = runCfg(t, CheckConfig{Name: "c", Type: "command", Command: []string{"sh", "-c", "echo nope; exit 3"}})
	if o.ok || o.reason != "exit status 3: nope" {
		t.Fatalf("exit 3: %+v", o)
	}
	o, _ = runCfg(t, CheckConfig{Name: "c", Type: "command", Command: []string{"no-such-program-vigil"}})
	if o.ok || !strings.Contains(o.reason, "not found in") {
		t.Fatalf("missing program: %+v", o)
	}
	// Plain environment: nothing of the sampler's leaks in; the shell only with shell = true.
	t.Setenv("VIGIL_SECRET", "x")
	o, _ = runCfg(t, CheckConfig{Name: "c", Type: "command", Shell: true, Command: []string{`test -z "$VIGIL_SECRET" && test "$LC_ALL" = C`}})
	if !o.ok {
		t.Fatalf("environment leaked: %+v", o)
	}
	o, _ = runCfg(t, CheckConfig{Name: "c", Type: "command", Command: []string{"echo", "$HOME;", "exit", "1"}})
	if !o.ok {
		t.Fatalf("argv went through a shell: %+v", o)
	}
}

func TestHangKilledWithGroup(t *testing.T) {
	dir := t.TempDir()
	pidf := filepath.Join(dir, "pids")
	// The script and its child ignore SIGTERM: SIGKILL after the grace.
	o, took := runCfg(t, CheckConfig{Name: "h", Type: "script", Timeout: durationOf(300 * time.Millisecond),
		Path: script(t, `trap '' TERM; sleep 1000 & echo $! >> `+pidf+`; echo $$ >> `+pidf+`; echo started; wait`)})
	if o.ok || !o.timedOut || o.reason != "process group killed" {
		t.Fatalf("hang: %+v", o)
	}
	if took > 300*time.Millisecond+killGrace(300*time.Millisecond)+time.Second {
		t.Fatalf("hang took %v", took)
	}
	waitGone(t, pids(t, pidf))
}

func TestFloodDoesNotBlock(t *testing.T) {
	// 16 MiB of output then a failure: the child must not block on the
	// pipe, and only the first line (of the first 4 KiB) is the reason.
	o, took := runCfg(t, CheckConfig{Name: "f", Type: "script", Timeout: durationOf(5 * time.Second),
		Path: script(t, `echo "first line"; head -c 16777216 /dev/zero; exit 4`)})
	if o.ok || o.timedOut || o.reason != "first line" {
		t.Fatalf("flood: %+v after %v", o, took)
	}
	// An endless flood is stopped at the timeout.
	o, took = runCfg(t, CheckConfig{Name: "f", Type: "command", Timeout: durationOf(300 * time.Millisecond), Command: []string{"yes", "flood"}})
	if o.ok || !o.timedOut {
		t.Fatalf("endless flood: %+v", o)
	}
	if took > 3*time.Second {
		t.Fatalf("endless flood took %v", took)
	}
}

func TestForkingChildrenKilled(t *testing.T) {
	dir := t.TempDir()
	pidf := filepath.Join(dir, "pids")
	// A bounded fork tree (2^6-1 processes, each recording its pid) that
	// then hangs: the group kill at the timeout takes all of them.
	body := `f() { echo $$ >> ` + pidf + `; if [ "$1" -gt 0 ]; then f $(($1-1)) & f $(($1-1)) & fi; wait; sleep 1000; }
f 5`
	// sh's $$ is the top shell in subshells; record real pids with sh -c.
	body = strings.ReplaceAll(body, "echo $$", `sh -c 'echo $PPID'`)
	o, _ := runCfg(t, CheckConfig{Name: "fork", Type: "script", Timeout: durationOf(time.Second), Path: script(t, body)})
	if !o.timedOut {
		t.Fatalf("fork tree: %+v", o)
	}
	ps := pids(t, pidf)
	if len(ps) < 10 {
		t.Fatalf("only %d processes recorded", len(ps))
	}
	waitGone(t, ps)

	// A check that passes but leaves a child behind: the child is killed
	// and the check does not wait for it to close the pipe.
	pidf2 := filepath.Join(dir, "pids2")
	o, took := runCfg(t, CheckConfig{Name: "bg", Type: "script", Path: script(t, `sleep 1000 & echo $! > `+pidf2+`; exit 0`)})
	if !o.ok || took > 2*time.Second {
		t.Fatalf("background child: %+v after %v", o, took)
	}
	waitGone(t, pids(t, pidf2))
}

func TestEscapedChildDoesNotHoldCheck(t *testing.T) {
	if _, err := lookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	pidf := filepath.Join(t.TempDir(), "pids")
	// setsid leaves the group; its sleep keeps the output pipe open.
	o, took := runCfg(t, CheckConfig{Name: "esc", Type: "script", Path: script(t, `setsid sh -c 'echo $$ > `+pidf+`; exec sleep 30' & sleep 0.2; echo bye; exit 1`)})
	ps := pids(t, pidf)
	t.Cleanup(func() {
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	if o.ok || o.reason != "bye" || took > 3*time.Second {
		t.Fatalf("escaped child: %+v after %v", o, took)
	}
}

func durationOf(d time.Duration) duration.Duration { return duration.Duration(d) }

func readAll(p string) ([]byte, error) { return os.ReadFile(p) }
