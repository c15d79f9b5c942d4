package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logsvc"
)

// logServer runs a log service with its API and returns the server URL and
// a function that sends raw syslog text over TCP and waits until stored.
func logServer(t *testing.T) (string, func(string, int)) {
	t.Helper()
	svc, err := logsvc.New(logsvc.Config{TCPAddr: "127.0.0.1:0", DataDir: t.TempDir(), Location: time.UTC}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	api := httptest.NewServer(svc.Handler())
	t.Cleanup(func() { api.Close(); cancel(); <-done })
	_, tcp, _ := svc.Addrs()
	var total uint64
	send := func(s string, n int) {
		t.Helper()
		c, err := net.Dial("tcp", tcp.String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, s)
		c.Close()
		total += uint64(n)
		for deadline := time.Now().Add(10 * time.Second); svc.Stats().Accepted < total; {
			if time.Now().After(deadline) {
				t.Fatalf("messages not stored: %+v", svc.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return api.URL, send
}

func TestLogsSearchCLI(t *testing.T) {
	srv, send := logServer(t)
	send("<12>Jan  5 10:00:00 cn01 sshd[7]: authentication failure for root\n"+
		"<14>Jan  5 10:00:01 cn02 sshd[8]: authentication failure for bob\n"+
		"<11>Jan  5 10:00:02 gpu01 nvidia: Xid 79 GPU has fallen off the bus\n", 3)

	var out, errb bytes.Buffer
	err := logsSearch(context.Background(), []string{"host:cn0*", "--server", srv, "authentication failure", "severity:warning"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v (%s)", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], " cn01 sshd[7] warning: authentication failure for root") {
		t.Fatalf("search output %q", out.String())
	}

	out.Reset()
	if err := logsSearch(context.Background(), []string{"--json", "--server", srv, "--limit", "2"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var hosts []string
	for {
		var r logsvc.Record
		if err := dec.Decode(&r); err != nil {
			break
		}
		hosts = append(hosts, r.Host)
	}
	if fmt.Sprint(hosts) != "[gpu01 cn02]" {
		t.Fatalf("--json --limit 2: hosts %v", hosts)
	}

	err = logsSearch(context.Background(), []string{"--server", srv, "hots:cn01"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `unknown filter "hots"`) {
		t.Fatalf("bad query error: %v", err)
	}
}

func TestLogsPatternsCLI(t *testing.T) {
	srv, send := logServer(t)
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "<14>Jan  5 10:00:00 cn%02d slurmd[1]: job %d completed in %d s\n", i%3, i, i*7)
	}
	send(b.String(), 12)
	var out, errb bytes.Buffer
	if err := logsPatterns(context.Background(), []string{"--server", srv}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("patterns output %q", out.String())
	}
	f := strings.Fields(lines[1])
	if f[1] != "12" || f[2] != "12" || f[5] != "3" || !strings.Contains(lines[1], "slurmd: job <*> completed in <*> s") {
		t.Fatalf("pattern line %q (fields %q)", lines[1], f)
	}
}

func TestLogsTailFollowCLI(t *testing.T) {
	srv, send := logServer(t)
	send("<14>Jan  5 10:00:00 cn01 app: old one\n<14>Jan  5 10:00:01 cn01 app: old two\n", 2)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	var wg sync.WaitGroup
	// Before the API server's cleanup, which waits for open streams.
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		logsTail(ctx, []string{"-f", "--limit", "1", "--server", srv, "host:cn01"}, pw, &errb)
		pw.Close()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufioScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("tail printed nothing")
		}
		return ""
	}
	if l := next(); !strings.HasSuffix(l, "app info: old two") {
		t.Fatalf("backlog line %q", l)
	}
	send("<14>Jan  5 10:00:02 cn02 app: not for us\n<14>Jan  5 10:00:03 cn01 app: live\n", 2)
	if l := next(); !strings.HasSuffix(l, "app info: live") {
		t.Fatalf("followed line %q", l)
	}
	cancel()
	go func() {
		for range lines {
		}
	}()
}

func bufioScanner(r io.Reader) *bufio.Scanner { return bufio.NewScanner(r) }
