package health

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// maxOutput is the output of a command kept (for its reason); the rest is
// read and discarded, so a flooding child never blocks on a full pipe.
const maxOutput = 4 << 10

// plainPath is the PATH commands get, and where bare names are looked up.
const plainPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// plainEnv is the whole environment of a command: nothing of the sampler's.
var plainEnv = []string{"PATH=" + plainPath, "LANG=C", "LC_ALL=C", "HOME=/"}

// execCheck runs argv in its own process group: exit 0 passes. A script's
// reason is the first line of its output; a command's the exit status
// (and that line).
func execCheck(argv []string, script bool, grace time.Duration) func(context.Context, *env) outcome {
	return func(ctx context.Context, _ *env) outcome {
		r, err := runGroup(ctx, argv, grace)
		if err != nil {
			return fail("%v", err)
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(r.out)), "\n")
		var status string
		switch {
		case r.timedOut:
			return outcome{timedOut: true, reason: "process group killed"}
		case r.ws.Exited() && r.ws.ExitStatus() == 0:
			return pass()
		case r.ws.Signaled():
			status = "killed by signal " + r.ws.Signal().String()
		default:
			status = fmt.Sprintf("exit status %d", r.ws.ExitStatus())
		}
		switch {
		case first == "":
			return fail("%s", status)
		case script:
			return fail("%s", first)
		}
		return fail("%s: %s", status, first)
	}
}

// lookPath finds a bare program name in plainPath.
func lookPath(prog string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	for _, dir := range filepath.SplitList(plainPath) {
		p := filepath.Join(dir, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in %s", prog, plainPath)
}

type runResult struct {
	ws       syscall.WaitStatus
	out      []byte
	timedOut bool
}

// runGroup starts argv as the leader of a new process group, stdin
// /dev/null, stdout and stderr one pipe. When ctx ends first the group
// gets SIGTERM, then SIGKILL after grace. Once the leader has exited
// (still unreaped, so its group id cannot be reused) whatever is left of
// the group is killed, so children it forked never outlive the check.
func runGroup(ctx context.Context, argv []string, grace time.Duration) (runResult, error) {
	var res runResult
	prog, err := lookPath(argv[0])
	if err != nil {
		return res, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return res, err
	}
	defer devnull.Close()
	rd, wr, err := os.Pipe()
	if err != nil {
		return res, err
	}
	defer rd.Close()
	// Fd puts the write end in blocking mode, as the child expects.
	pid, err := syscall.ForkExec(prog, argv, &syscall.ProcAttr{
		Dir:   "/",
		Env:   plainEnv,
		Files: []uintptr{devnull.Fd(), wr.Fd(), wr.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	wr.Close()
	if err != nil {
		return res, fmt.Errorf("start %s: %v", argv[0], err)
	}

	outc := make(chan []byte, 1)
	go func() {
		buf := make([]byte, maxOutput)
		var discard [4096]byte
		n := 0
		for {
			var err error
			if n < len(buf) {
				var m int
				m, err = rd.Read(buf[n:])
				n += m
			} else {
				_, err = rd.Read(discard[:])
			}
			if err != nil {
				break
			}
		}
		outc <- buf[:n]
	}()
	exited := make(chan struct{})
	go func() {
		waitExited(pid)
		close(exited)
	}()

	select {
	case <-exited:
	case <-ctx.Done():
		res.timedOut = true
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-exited:
			t.Stop()
		case <-t.C:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-exited
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // the rest of the group
	for {
		_, err := syscall.Wait4(pid, &res.ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	// A child that left the group (setsid) may still hold the pipe open.
	_ = rd.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	res.out = <-outc
	return res, nil
}

// waitExited blocks until pid has exited, leaving it unreaped (WNOWAIT).
func waitExited(pid int) {
	const (
		pPID    = 1
		wExited = 4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)), wExited|wNoWait, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}
