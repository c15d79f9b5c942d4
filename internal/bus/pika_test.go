package bus

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/rabbitmq"
)

// TestPikaExample runs the Python consumer of docs/format/bus.md against
// what the bus publishes: it must print the metrics value, the log line
// and the event.
func TestPikaExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rabbitmq-server")
	}
	// Debian's python3-pika is in /usr/bin/python3's path, which another
	// python3 on PATH (pyenv) may shadow.
	py := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import pika").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		testutil.MissingPeer(t, "python3 with pika missing (apt-get install python3-pika)")
	}
	doc, err := os.ReadFile("../../docs/format/bus.md")
	if err != nil {
		t.Fatal(err)
	}
	_, script, ok := strings.Cut(string(doc), "```python\n")
	script, _, _ = strings.Cut(script, "```")
	if !ok {
		t.Fatal("no python block in docs/format/bus.md")
	}
	br := rabbitmq.Start(t)
	url := br.URL("guest", "guest")
	b, err := New(Config{URL: url}, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	var out testutil.SyncBuffer
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	cmd := exec.CommandContext(pctx, py, "-c", script, url)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	d := []*metric.Desc{metric.NewDesc("node_load1", "", metric.Gauge), metric.NewDesc("node_load5", "", metric.Gauge)}
	want := []string{"metrics.cn7 ", " 0.75", "cn7 slurmd err 3 Unable to contact slurm controller", "node_down cn7 cn7 is down"}
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		// Forget the schema, so each tick carries it (the consumer may have
		// bound its queue after the first).
		b.mu.Lock()
		clear(b.nodes)
		b.mu.Unlock()
		b.Tick("cn7", time.Now(), d, []float64{0.75, 0.5})
		b.Logs([]logstore.Record{{Seq: 1, Time: time.Now(), Host: "cn7", App: "slurmd", Severity: 3, Pattern: 3, Text: "Unable to contact slurm controller"}})
		b.Emit(events.Event{Time: time.Now(), Kind: events.KindNodeDown, Node: "cn7", Severity: events.SeverityCritical, Summary: "cn7 is down"})
		all := true
		for _, w := range want {
			all = all && strings.Contains(out.String(), w)
		}
		if all {
			return
		}
	}
	t.Errorf("the Python consumer printed:\n%s\nwant lines with %q", out.String(), want)
}
