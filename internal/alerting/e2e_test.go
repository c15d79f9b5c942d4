package alerting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/query"
	vtestutil "github.com/vigil-hpc/vigil/internal/testutil"
)

// webhook records what Alertmanager notifies: "ALERTNAME STATUS" lines.
type webhook struct {
	mu  sync.Mutex
	got []string
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Alerts []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&msg)
	h.mu.Lock()
	for _, a := range msg.Alerts {
		h.got = append(h.got, a.Labels["alertname"]+" "+a.Status)
	}
	h.mu.Unlock()
}

func (h *webhook) has(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.got, s)
}

// alertmanager is a real Alertmanager on loopback with a private config
// and data directory, gossip off.
type alertmanager struct {
	t          *testing.T
	bin, addr  string
	cfg, data  string
	cmd        *exec.Cmd
	out        bytes.Buffer
	amtoolPath string
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (am *alertmanager) url() string { return "http://" + am.addr }

func (am *alertmanager) start() {
	am.t.Helper()
	am.cmd = exec.Command(am.bin, "--config.file="+am.cfg, "--storage.path="+am.data,
		"--web.listen-address="+am.addr, "--cluster.listen-address=")
	am.cmd.Stdout, am.cmd.Stderr = &am.out, &am.out
	if err := am.cmd.Start(); err != nil {
		am.t.Fatal(err)
	}
	waitFor(am.t, 10*time.Second, "alertmanager ready", func() bool {
		resp, err := http.Get(am.url() + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (am *alertmanager) stop() {
	if am.cmd == nil {
		return
	}
	am.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { am.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		am.cmd.Process.Kill()
		<-done
	}
	am.cmd = nil
}

// amtool runs amtool against the Alertmanager and returns its output.
func (am *alertmanager) amtool(args ...string) string {
	am.t.Helper()
	out, err := exec.Command(am.amtoolPath, append([]string{"--alertmanager.url=" + am.url()}, args...)...).CombinedOutput()
	if err != nil {
		am.t.Fatalf("amtool %v: %v: %s", args, err, out)
	}
	return string(out)
}

// queried reports whether `amtool alert query` (active alerts, or with
// extra flags others) lists an alert of that name.
func (am *alertmanager) queried(name string, flags ...string) bool {
	var alerts []struct {
		Labels map[string]string `json:"labels"`
	}
	out := am.amtool(append([]string{"alert", "query", "-o", "json"}, flags...)...)
	if err := json.Unmarshal([]byte(out), &alerts); err != nil {
		am.t.Fatalf("amtool alert query: %v: %s", err, out)
	}
	for _, a := range alerts {
		if a.Labels["alertname"] == name {
			return true
		}
	}
	return false
}

// TestE2EAlertmanager: alerts fire in Vigil and reach a real Alertmanager
// (amtool sees them, its webhook is notified), a silence set with amtool
// holds, an alert that fires while Alertmanager is down arrives once it
// is back, and a resolved alert resolves there.
func TestE2EAlertmanager(t *testing.T) {
	bin := vtestutil.LookPeer(t, "prometheus-alertmanager", "apt-get install prometheus-alertmanager")
	amtool := vtestutil.LookPeer(t, "amtool", "apt-get install prometheus-alertmanager")
	var hook webhook
	hs := httptest.NewServer(&hook)
	defer hs.Close()
	dir := t.TempDir()
	am := &alertmanager{t: t, bin: bin, amtoolPath: amtool, addr: freePort(t), data: filepath.Join(dir, "am"),
		cfg: writeFile(t, dir, "am.yml", fmt.Sprintf(`route:
  receiver: hook
  group_by: [alertname]
  group_wait: 100ms
  group_interval: 200ms
  repeat_interval: 1h
receivers:
- name: hook
  webhook_configs:
  - url: %s/
    send_resolved: true
`, hs.URL))}
	defer func() {
		am.stop()
		if t.Failed() {
			t.Logf("alertmanager output:\n%s", am.out.String())
		}
	}()
	am.start()
	am.amtool("silence", "add", "alertname=Quiet", "--comment=e2e", "--author=vigil", "--duration=1h")

	e := newEnv(t, "", query.Options{})
	now := time.Now()
	e.add(t, now, 1, []string{"x", "node", "cn1"}, []string{"quiet", "node", "cn2"})
	file := writeFile(t, dir, "r.yml", `groups:
- name: e2e
  rules:
  - alert: XHigh
    expr: x > 0
    for: 1s
    labels: {severity: warning}
  - alert: Quiet
    expr: quiet > 0
  - alert: WhileDown
    expr: later > 0
`)
	m, _ := e.start(t, Options{Files: []string{file}, Interval: 200 * time.Millisecond, ResendDelay: 500 * time.Millisecond,
		Alertmanagers: []string{am.url()}, ExternalURL: "http://vigil.test:9090"})

	waitFor(t, 10*time.Second, "XHigh firing at the webhook", func() bool { return hook.has("XHigh firing") })
	if !am.queried("XHigh") {
		t.Errorf("amtool alert query does not list XHigh")
	}
	waitFor(t, 5*time.Second, "Quiet silenced in Alertmanager", func() bool { return am.queried("Quiet", "--silenced") })
	if am.queried("Quiet") {
		t.Errorf("Quiet listed as active despite its silence")
	}

	// Alertmanager away: an alert fires meanwhile and arrives on return.
	am.stop()
	e.add(t, time.Now(), 1, []string{"later", "node", "cn3"})
	waitFor(t, 5*time.Second, "WhileDown firing in Vigil", func() bool {
		for _, a := range m.Alerts() {
			if a.Labels.Get("alertname") == "WhileDown" {
				return true
			}
		}
		return false
	})
	time.Sleep(500 * time.Millisecond) // a send or two fail
	am.start()
	waitFor(t, 10*time.Second, "WhileDown in Alertmanager after its restart", func() bool { return am.queried("WhileDown") })
	waitFor(t, 5*time.Second, "WhileDown at the webhook", func() bool { return hook.has("WhileDown firing") })

	// Resolved in Vigil, resolved in Alertmanager.
	e.add(t, time.Now(), 0, []string{"x", "node", "cn1"})
	waitFor(t, 10*time.Second, "XHigh resolved at the webhook", func() bool { return hook.has("XHigh resolved") })
	waitFor(t, 5*time.Second, "XHigh gone from amtool", func() bool { return !am.queried("XHigh") })
	if am.queried("Quiet") || hook.has("Quiet firing") {
		t.Errorf("the silence did not hold: webhook got %v", hook.got)
	}
}
