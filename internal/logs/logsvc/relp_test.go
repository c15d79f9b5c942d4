package logsvc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/relp"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// relpSession is a minimal RELP client: open, then syslog frames.
type relpSession struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	txnr uint32
}

func dialRELP(t *testing.T, addr string) *relpSession {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &relpSession{t: t, c: c, r: bufio.NewReader(c)}
	s.send("open", "relp_version=0\nrelp_software=test\ncommands=syslog")
	s.ack()
	return s
}

func (s *relpSession) send(cmd, data string) {
	s.t.Helper()
	s.txnr++
	if _, err := s.c.Write(relp.AppendFrame(nil, s.txnr, cmd, []byte(data))); err != nil {
		s.t.Fatal(err)
	}
}

// ack reads one response and checks it is a 200.
func (s *relpSession) ack() {
	s.t.Helper()
	s.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var buf []byte
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			s.t.Fatalf("waiting for rsp: %v", err)
		}
		buf = append(buf, b)
		h, data, n, err := relp.ParseFrame(buf, 1<<16)
		if err != nil {
			s.t.Fatal(err)
		}
		if n > 0 {
			if h.Cmd != "rsp" || !strings.HasPrefix(string(data), "200") {
				s.t.Fatalf("got %s %q, want rsp 200", h.Cmd, data)
			}
			return
		}
	}
}

func relpMsg(i int) string {
	return fmt.Sprintf("<13>2026-01-05T10:00:00.%06dZ cn01 app: relp message %d", i, i)
}

// TestRELPResendAfterRestartStoredOnce stands for a crash between the
// commit and the acknowledgement: messages are stored, the sender never
// sees their acks, the service starts again on the same directory and the
// sender resends them on a new session. They are acknowledged again and
// not stored twice; what follows them is stored.
func TestRELPResendAfterRestartStoredOnce(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, func(c *Config) { c.RELPAddr = "127.0.0.1:0" })
	s := dialRELP(t, h.svc.RELPAddr().String())
	for i := 1; i <= 5; i++ {
		s.send("syslog", relpMsg(i))
	}
	for range 5 {
		s.ack()
	}
	h.stop()

	h = start(t, dir, func(c *Config) { c.RELPAddr = "127.0.0.1:0" })
	s = dialRELP(t, h.svc.RELPAddr().String())
	for _, i := range []int{3, 4, 5, 6} {
		s.send("syslog", relpMsg(i))
	}
	for range 4 {
		s.ack()
	}
	r := h.search(t, `"relp message"`, 100)
	if len(r.Records) != 6 {
		t.Fatalf("%d records stored, want 6: %+v", len(r.Records), r.Records)
	}
	seen := map[string]int{}
	for _, g := range r.Records {
		seen[g.Text]++
	}
	for i := 1; i <= 6; i++ {
		if n := seen[fmt.Sprintf("relp message %d", i)]; n != 1 {
			t.Errorf("message %d stored %d times", i, n)
		}
	}
}

// TestRsyslogRELPKill9 forwards messages from a private rsyslogd over
// omrelp to a vigil log service in a child process, kills the child with
// SIGKILL mid-stream, starts it again on the same directory and port, and
// checks that every message is stored exactly once. Two ways to die: from
// outside at any moment, and from inside right after a commit, before its
// acknowledgements, which leaves rsyslog resending stored messages.
func TestRsyslogRELPKill9(t *testing.T) {
	t.Run("outside", func(t *testing.T) { testRsyslogRELPKill9(t, false) })
	t.Run("after-commit", func(t *testing.T) { testRsyslogRELPKill9(t, true) })
}

func testRsyslogRELPKill9(t *testing.T, afterCommit bool) {
	if testing.Short() {
		t.Skip("runs rsyslogd and a child process")
	}
	rsyslogd := "/usr/sbin/rsyslogd"
	if p, err := exec.LookPath("rsyslogd"); err == nil {
		rsyslogd = p
	}
	_, errBin := os.Stat(rsyslogd)
	mods, _ := filepath.Glob("/usr/lib/*/rsyslog/omrelp.so")
	var errMod error
	if len(mods) == 0 {
		errMod = errors.New("no omrelp.so under /usr/lib/*/rsyslog")
	}
	if errBin != nil || errMod != nil {
		testutil.MissingPeer(t, "rsyslogd with omrelp not installed (apt-get install rsyslog rsyslog-relp): %v %v", errBin, errMod)
	}
	dir := t.TempDir()
	relpAddr := freeAddr(t)
	inAddr := freeAddr(t)
	const n = 20000
	crashAt := 0
	if afterCommit {
		crashAt = n / 4
	}
	child := startChild(t, dir, relpAddr, crashAt)

	work := t.TempDir()
	_, relpPort, _ := strings.Cut(relpAddr, ":")
	_, inPort, _ := strings.Cut(inAddr, ":")
	// Our own instance: its own work directory, pid file and ports; the
	// system's rsyslog and /dev/log are not touched. imtcp takes what the
	// test sends; omrelp retries forever, once a second.
	conf := fmt.Sprintf(`global(workDirectory=%q)
module(load="imtcp")
module(load="omrelp")
input(type="imtcp" address="127.0.0.1" port=%q)
action(type="omrelp" target="127.0.0.1" port=%q template="RSYSLOG_ForwardFormat"
       action.resumeRetryCount="-1" action.resumeInterval="1"
       queue.type="LinkedList" queue.size="100000")
`, work, inPort, relpPort)
	confPath := filepath.Join(work, "rsyslog.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := exec.Command(rsyslogd, "-f", confPath, "-i", filepath.Join(work, "rsyslogd.pid"), "-n")
	var rsOut strings.Builder
	rs.Stdout, rs.Stderr = &rsOut, &rsOut
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		rs.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { rs.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			rs.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("rsyslogd output:\n%s", rsOut.String())
		}
	}()
	var in net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if in, err = net.Dial("tcp", inAddr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rsyslogd does not listen on %s: %v\n%s", inAddr, err, rsOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer in.Close()

	sent := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(in)
		for i := range n {
			fmt.Fprintf(w, "<13>Jan  5 10:00:00 cn%02d app: relp e2e message %d\n", i%8, i)
			if i%500 == 0 {
				w.Flush()
				time.Sleep(5 * time.Millisecond) // a stream, not one burst
			}
		}
		sent <- w.Flush()
	}()

	if afterCommit {
		child.wait(t, 20*time.Second)
	} else {
		waitRecords(t, child.http, n/4, 20*time.Second)
		child.kill()
	}
	stored := storeCount(t, dir)
	t.Logf("killed with %d messages stored", stored)
	if stored >= n {
		t.Fatalf("all %d messages stored before the kill; the test did not cut the stream", stored)
	}

	child = startChild(t, dir, relpAddr, 0)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	waitRecords(t, child.http, n, 25*time.Second)
	// Anything still in flight would be a duplicate: let omrelp finish.
	time.Sleep(time.Second)
	child.kill()

	counts := make([]int, n)
	st, err := logstore.Open(logstore.Options{Dir: filepath.Join(dir, "segments")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var after uint64
	for {
		recs, upTo, err := st.After(after, logstore.Query{}, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var i int
			if _, err := fmt.Sscanf(r.Text, "relp e2e message %d", &i); err != nil || i < 0 || i >= n {
				t.Fatalf("unexpected record %q", r.Text)
			}
			if r.Flags&logstore.FlagRELP == 0 {
				t.Fatalf("record %d not flagged as RELP", r.Seq)
			}
			counts[i]++
		}
		if upTo == after {
			break
		}
		after = upTo
	}
	for i, c := range counts {
		if c != 1 {
			t.Errorf("message %d stored %d times", i, c)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type childProc struct {
	cmd  *exec.Cmd
	http string
	done bool
}

func startChild(t *testing.T, dir, relpAddr string, crashAt int) *childProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, relpEnv+"="+relpAddr, fmt.Sprintf("%s=%d", crashEnv, crashAt))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childProc{cmd: cmd}
	t.Cleanup(c.kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child did not report its addresses: %v", err)
	}
	go io.Copy(io.Discard, out)
	_, c.http, _ = strings.Cut(strings.TrimSpace(line), " ")
	return c
}

// wait waits for the child to kill itself.
func (c *childProc) wait(t *testing.T, within time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		c.done = true
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child ended with %v, want SIGKILL", err)
		}
	case <-time.After(within):
		t.Fatalf("child did not crash within %v", within)
	}
}

func (c *childProc) kill() {
	if c.done {
		return
	}
	c.done = true
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// waitRecords polls the child's /stats until its store holds n records.
func waitRecords(t *testing.T, httpAddr string, n uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var st Stats
	for {
		resp, err := http.Get("http://" + httpAddr + Prefix + "/stats")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if st.Store.Records >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store holds %d records after %v, want %d", st.Store.Records, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func storeCount(t *testing.T, dir string) uint64 {
	t.Helper()
	st, err := logstore.Open(logstore.Options{Dir: filepath.Join(dir, "segments")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return st.Stats().Records
}
