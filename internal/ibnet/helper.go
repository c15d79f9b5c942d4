package ibnet

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// protocolGreeting is the helper's first line; the number is the
// protocol's version (2: OperVLs in P lines, flags and the optional
// attributes in C lines, the MAD count in E lines).
const protocolGreeting = "R vigil-ibmad 2"

// ErrHelper marks a failure of the helper process itself (it died, timed
// out, or spoke nonsense); the sweeper then restarts it with backoff.
var ErrHelper = errors.New("vigil-ibmad helper failed")

// helper is one running vigil-ibmad process. Not safe for concurrent use.
type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	r      *bufio.Reader
	req    []byte
	c      CounterLine // reused by query: 0 allocs per sweep
	stderr limitedBuffer
}

// startHelper runs path in dir with the MAD timeout and retries; env nil = ours.
// vlAttr, if not 0, is the attribute the helper asks in place of
// PortVLXmitWaitCounters (a test hook).
func startHelper(path string, env []string, dir string, madTimeout time.Duration, retries, window, vlAttr int) (*helper, error) {
	args := []string{"-t", strconv.Itoa(int(madTimeout / time.Millisecond)), "-r", strconv.Itoa(retries), "-w", strconv.Itoa(window)}
	if vlAttr != 0 {
		args = append(args, "-v", strconv.Itoa(vlAttr))
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	h := &helper{cmd: cmd}
	// Its stderr carries libibmad's warnings: keep the tail for errors.
	h.stderr.max = 4096
	cmd.Stderr = &h.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	pw.Close()
	h.stdin, h.stdout, h.r = in, pr, bufio.NewReaderSize(pr, maxLine)
	h.req = make([]byte, 0, 64*1024)
	line, err := h.readLine(time.Now().Add(10 * time.Second))
	if err == nil && !bytes.Equal(line, []byte(protocolGreeting)) {
		if bytes.HasPrefix(line, []byte("X ")) {
			err = fmt.Errorf("%s%s", trunc(line[2:]), h.stderrTail())
		} else {
			err = fmt.Errorf("unexpected greeting %q, want %q (a vigil-ibmad of another version? make build)", trunc(line), protocolGreeting)
		}
	}
	if err != nil {
		h.close()
		if errors.Is(err, ErrHelper) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrHelper, path, err)
	}
	return h, nil
}

// readLine returns the next line without its newline; the slice is valid
// until the next read. Lines longer than maxLine are an error.
func (h *helper) readLine(deadline time.Time) ([]byte, error) {
	if err := h.stdout.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	line, err := h.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrHelper, maxLine)
		}
		return nil, fmt.Errorf("%w: %v%s", ErrHelper, err, h.stderrTail())
	}
	return line[:len(line)-1], nil
}

func (h *helper) stderrTail() string {
	h.stderr.mu.Lock()
	s := bytes.TrimSpace(append([]byte(nil), h.stderr.b.Bytes()...))
	h.stderr.mu.Unlock()
	if i := bytes.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) == 0 {
		return ""
	}
	return " (" + trunc(s) + ")"
}

// discover asks for the topology.
func (h *helper) discover(timeout time.Duration) (Topology, error) {
	if _, err := h.stdin.Write([]byte("D\n")); err != nil {
		return Topology{}, fmt.Errorf("%w: write: %v", ErrHelper, err)
	}
	deadline := time.Now().Add(timeout)
	var d TopologyDecoder
	for {
		line, err := h.readLine(deadline)
		if err != nil {
			return Topology{}, err
		}
		done, err := d.Line(line)
		if err != nil {
			if bytes.HasPrefix(line, []byte("X ")) {
				return Topology{}, err // the helper is fine, the fabric is not
			}
			return Topology{}, fmt.Errorf("%w: %v", ErrHelper, err)
		}
		if done {
			return d.Topology(), nil
		}
	}
}

// query sends the (lid, port) list and calls fn for every C line, in
// order; it returns the helper's own elapsed time for the MADs and their
// number.
func (h *helper) query(q []portRef, timeout time.Duration, fn func(i int, c *CounterLine)) (time.Duration, int, error) {
	h.req = append(h.req[:0], 'Q', ' ')
	h.req = strconv.AppendInt(h.req, int64(len(q)), 10)
	h.req = append(h.req, '\n')
	for _, p := range q {
		h.req = strconv.AppendUint(h.req, uint64(p.lid), 10)
		h.req = append(h.req, ' ')
		h.req = strconv.AppendUint(h.req, uint64(p.port), 10)
		h.req = append(h.req, '\n')
	}
	if _, err := h.stdin.Write(h.req); err != nil {
		return 0, 0, fmt.Errorf("%w: write: %v", ErrHelper, err)
	}
	deadline := time.Now().Add(timeout)
	c := &h.c
	for i := 0; ; i++ {
		line, err := h.readLine(deadline)
		if err != nil {
			return 0, 0, err
		}
		if len(line) > 0 && line[0] == 'E' {
			n, ns, mads, err := ParseEnd(line)
			if err != nil || n != len(q) || i != len(q) {
				return 0, 0, fmt.Errorf("%w: answered %d of %d ports", ErrHelper, i, len(q))
			}
			return time.Duration(ns), mads, nil
		}
		if i >= len(q) {
			return 0, 0, fmt.Errorf("%w: more answers than ports", ErrHelper)
		}
		if err := ParseCounters(line, c); err != nil {
			return 0, 0, fmt.Errorf("%w: counters line %q", ErrHelper, trunc(line))
		}
		if c.LID != q[i].lid || c.Port != int(q[i].port) {
			return 0, 0, fmt.Errorf("%w: answer for lid %d port %d out of order", ErrHelper, c.LID, c.Port)
		}
		fn(i, c)
	}
}

// close ends the helper: closing stdin ends it; it is killed if it lingers.
func (h *helper) close() {
	h.stdin.Close()
	done := make(chan struct{})
	go func() {
		h.cmd.Wait()
		close(done)
	}()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		h.cmd.Process.Kill()
		<-done
	}
	h.stdout.Close()
}

// limitedBuffer keeps the last max bytes written.
type limitedBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	if len(p) > l.max {
		p = p[len(p)-l.max:]
	}
	if l.b.Len()+len(p) > l.max {
		keep := l.b.Bytes()[l.b.Len()-(l.max-len(p)):]
		tmp := append([]byte(nil), keep...)
		l.b.Reset()
		l.b.Write(tmp)
	}
	l.b.Write(p)
	return n, nil
}
