package logsvc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// These tests send with the real clients an HPC site uses: util-linux
// logger and rsyslog forwarding.

func waitSearch(t *testing.T, h *harness, q string, n int) SearchResponse {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := h.search(t, q, 100)
		if len(r.Records) >= n {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("search %q: %d records, want %d; stats %+v", q, len(r.Records), n, h.svc.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLogger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs logger")
	}
	bin := testutil.LookPeer(t, "logger", "apt-get install bsdutils")
	h := start(t, t.TempDir(), nil)
	_, tcpPort, _ := strings.Cut(h.tcpAddr(), ":")
	_, udpPort, _ := strings.Cut(h.udpAddr(), ":")
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	cases := []struct {
		name  string
		args  []string
		msgID string
		sd    string
	}{
		{"tcp-rfc3164", []string{"--tcp", "--port", tcpPort, "--rfc3164"}, "", ""},
		{"tcp-rfc5424", []string{"--tcp", "--port", tcpPort, "--rfc5424", "--msgid", "M1"}, "M1", ""},
		{"tcp-octet", []string{"--tcp", "--port", tcpPort, "--rfc5424", "--octet-count"}, "", ""},
		{"udp-rfc3164", []string{"--udp", "--port", udpPort, "--rfc3164"}, "", ""},
		{"udp-rfc5424-sd", []string{"--udp", "--port", udpPort, "--rfc5424", "--sd-id", "job@32473", "--sd-param", `id="42"`}, "", `[job@32473 id="42"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			word := "w" + nonce + strings.ReplaceAll(c.name, "-", "")
			text := "disk " + word + " is 93% full"
			args := append([]string{"--server", "127.0.0.1", "-t", "vigiltest", "-p", "daemon.warning"}, c.args...)
			out, err := exec.Command(bin, append(args, text)...).CombinedOutput()
			if err != nil {
				t.Fatalf("logger %v: %v\n%s", args, err, out)
			}
			r := waitSearch(t, h, word, 1)
			g := r.Records[0]
			if g.App != "vigiltest" || g.Severity != "warning" || g.Facility != 3 || g.Text != text || g.Host == "" || g.Malformed {
				t.Fatalf("got %+v", g)
			}
			if g.MsgID != c.msgID || (c.sd != "" && !strings.Contains(g.SD, c.sd)) {
				t.Fatalf("msgid %q sd %q, want %q %q", g.MsgID, g.SD, c.msgID, c.sd)
			}
			if d := time.Since(g.Time); d < -time.Minute || d > time.Minute {
				t.Fatalf("message time %v is %v away from now", g.Time, d)
			}
		})
	}
}

func TestRsyslogForwarding(t *testing.T) {
	if testing.Short() {
		t.Skip("runs rsyslogd")
	}
	rsyslogd, err := exec.LookPath("rsyslogd")
	if err != nil {
		if _, err2 := os.Stat("/usr/sbin/rsyslogd"); err2 != nil {
			testutil.MissingPeer(t, "rsyslogd not installed (apt-get install rsyslog)")
		}
		rsyslogd = "/usr/sbin/rsyslogd"
	}
	logger := testutil.LookPeer(t, "logger", "apt-get install bsdutils")
	h := start(t, t.TempDir(), nil)
	_, port, _ := strings.Cut(h.tcpAddr(), ":")
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	// Our own instance: its own socket, work directory and pid file; the
	// system's /dev/log and rsyslog are not touched. Two forwards to the
	// same port: RFC 5424 octet-counted and the traditional format with
	// newlines.
	conf := fmt.Sprintf(`global(workDirectory=%q)
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket=%q RateLimit.Interval="0" CreatePath="on")
action(type="omfwd" target="127.0.0.1" port=%q protocol="tcp" template="RSYSLOG_SyslogProtocol23Format" TCP_Framing="octet-counted")
action(type="omfwd" target="127.0.0.1" port=%q protocol="tcp" template="RSYSLOG_ForwardFormat")
`, dir, sock, port, port)
	confPath := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rsyslogd, "-f", confPath, "-i", filepath.Join(dir, "rsyslogd.pid"), "-n")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("rsyslogd output:\n%s", stderr.String())
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rsyslogd did not create %s:\n%s", sock, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	nonce := "r" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const n = 20
	for i := range n {
		msg := fmt.Sprintf("slurmstepd %s step %d finished with exit code %d", nonce, i, i%3)
		if out, err := exec.Command(logger, "-u", sock, "-t", "slurmstepd", "-p", "local3.err", msg).CombinedOutput(); err != nil {
			t.Fatalf("logger -u: %v\n%s", err, out)
		}
	}
	r := waitSearch(t, h, nonce, 2*n)
	if len(r.Records) != 2*n {
		t.Fatalf("got %d records, want %d (each message by both forwards)", len(r.Records), 2*n)
	}
	seen := map[string]int{}
	for _, g := range r.Records {
		if g.App != "slurmstepd" || g.Severity != "err" || g.Facility != 19 || g.Host == "" || g.Malformed {
			t.Fatalf("record %+v", g)
		}
		seen[g.Text]++
	}
	for i := range n {
		msg := fmt.Sprintf("slurmstepd %s step %d finished with exit code %d", nonce, i, i%3)
		if seen[msg] != 2 {
			t.Errorf("message %d seen %d times, want 2: %q; texts %v", i, seen[msg], msg, seen)
		}
	}
	// The same words in both framings get the same pattern.
	pats := map[uint64]bool{}
	for _, g := range r.Records {
		pats[g.Pattern] = true
	}
	if len(pats) != 1 {
		t.Errorf("%d patterns for one message shape: %v", len(pats), pats)
	}
}
