package logsvc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logstore"
)

const (
	childEnv = "VIGIL_LOGSVC_TEST_CHILD"
	relpEnv  = "VIGIL_LOGSVC_TEST_RELP" // the child's RELP address
	// crashEnv makes the child SIGKILL itself once this many messages are
	// stored, right after the commit and before any acknowledgement.
	crashEnv = "VIGIL_LOGSVC_TEST_CRASH_AFTER"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(runChild(dir))
	}
	os.Exit(m.Run())
}

// runChild is the service as a separate process, to be killed by the test.
func runChild(dir string) int {
	svc, err := New(Config{TCPAddr: "127.0.0.1:0", RELPAddr: os.Getenv(relpEnv), DataDir: dir}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if n, _ := strconv.ParseUint(os.Getenv(crashEnv), 10, 64); n > 0 {
		svc.afterCommit = func(accepted uint64) {
			if accepted >= n {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go http.Serve(ln, svc.Handler())
	_, tcp, _ := svc.Addrs()
	fmt.Printf("%s %s\n", tcp, ln.Addr())
	if err := svc.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestKill9LosesNothingAccepted kills the service with SIGKILL while a
// sender is still writing, then checks that every message the service had
// reported as accepted is in the store, in order, and that the service
// starts again on the same directory.
func TestKill9LosesNothingAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child did not report its addresses: %v", err)
	}
	tcpAddr, httpAddr, _ := strings.Cut(strings.TrimSpace(line), " ")

	conn, err := net.Dial("tcp", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const total = 2_000_000
	go func() {
		w := bufio.NewWriterSize(conn, 64<<10)
		for i := range total {
			if _, err := fmt.Fprintf(w, "<13>Jan  5 10:00:00 cn%02d app: crash test message %d\n", i%16, i); err != nil {
				return
			}
		}
		w.Flush()
	}()

	var accepted uint64
	deadline := time.Now().Add(30 * time.Second)
	for accepted < 50_000 {
		if time.Now().After(deadline) {
			t.Fatalf("child accepted only %d messages", accepted)
		}
		time.Sleep(10 * time.Millisecond)
		resp, err := http.Get("http://" + httpAddr + Prefix + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		var st Stats
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		accepted = st.Accepted
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	t.Logf("killed after %d accepted messages", accepted)

	st, err := logstore.Open(logstore.Options{Dir: filepath.Join(dir, "segments")})
	if err != nil {
		t.Fatal(err)
	}
	stats := st.Stats()
	if stats.Records < accepted {
		st.Close()
		t.Fatalf("store holds %d records, the service had accepted %d", stats.Records, accepted)
	}
	// One connection: the store holds messages 0..n-1, in order, each once.
	var after uint64
	want := 0
	for {
		recs, upTo, err := st.After(after, logstore.Query{}, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if w := fmt.Sprintf("crash test message %d", want); r.Text != w {
				st.Close()
				t.Fatalf("record %d: %q, want %q", r.Seq, r.Text, w)
			}
			want++
		}
		if upTo == after {
			break
		}
		after = upTo
	}
	st.Close()
	if uint64(want) != stats.Records {
		t.Fatalf("read %d records, stats say %d", want, stats.Records)
	}

	// The service starts again and mines what was stored after its last
	// pattern save.
	h := start(t, dir, nil)
	r := h.search(t, fmt.Sprintf(`"crash test message %d"`, want-1), 1)
	if len(r.Records) != 1 || r.Records[0].Pattern == 0 {
		t.Fatalf("last message after restart: %+v", r.Records)
	}
}
