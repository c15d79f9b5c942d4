package main

import (
	"bufio"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// `vigil server` stopped with SIGTERM while a dashboard's live stream is
// open exits 0 within a second (it used to wait out the HTTP grace period
// of 10 s and exit 1).
func TestE2EServerStopsWithLiveStreamOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	addr := freePort(t)
	cmd := vigil(t, "server", "--http", addr, "--data", t.TempDir())
	errBuf := &testutil.SyncBuffer{}
	cmd.Stderr = errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }()
	defer func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	}()
	var resp *http.Response
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		if resp, err = http.Get("http://" + addr + "/api/web/live?expr=up"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no live stream within 15s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("live stream: %s", resp.Status)
	}
	// Wait for the first event, so the stream is being served.
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case <-done:
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			t.Errorf("exit code %d, want 0; stderr:\n%s", ee.ExitCode(), errBuf.String())
		} else if waitErr != nil {
			t.Fatal(waitErr)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("stopped %v after SIGTERM, want < 1s", took)
		}
	case <-time.After(time.Second):
		t.Fatalf("server still running 1s after SIGTERM with a live stream open; stderr:\n%s", errBuf.String())
	}
}
