package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// getJSON decodes the data of a Prometheus-style API answer.
func getJSON(t *testing.T, u string, data any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("GET %s: %d %s %v", u, resp.StatusCode, body.Error, err)
	}
	if err := json.Unmarshal(body.Data, data); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// TestSimulateHealthIntoServer runs the simulator into a server with a
// fast interval and a time-lapse fault schedule (a check fails 0.3 s in, a
// node goes silent for about a second): the server stores
// vigil_health_check_ok == 0 for a node, its drain tap emits health_fail
// with the check and reason, and the silent node goes down and up again.
func TestSimulateHealthIntoServer(t *testing.T) {
	const nodes, interval, scale = 50, 50 * time.Millisecond, 0.01
	httpAddr, err := loopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	wireAddr, err := loopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	srvDone, simDone := make(chan error, 1), make(chan error, 1)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for _, c := range []chan error{simDone, srvDone} {
			if err := <-c; err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(stop) // before dir goes
	go func() {
		srvDone <- runServer(ctx, []string{"--http", httpAddr, "--listen", wireAddr, "--data", dir,
			"--interval", interval.String(), "--log-level", "error"}, io.Discard, io.Discard)
	}()
	if err := waitListening(ctx, httpAddr); err != nil {
		simDone <- nil
		t.Fatal(err)
	}
	o := simulate.Options{Nodes: nodes, CPUs: 1, Interval: interval, Upstream: []string{wireAddr}, GroupSize: 25, Seed: 3,
		Health: true, Outages: true, FaultScale: scale, Log: slog.New(slog.DiscardHandler)}
	go func() { simDone <- simulate.Run(ctx, o) }()

	// The node the schedule silences first (which one does not depend on
	// the start).
	t0 := time.Unix(1e9, 0)
	f, err := simulate.NewFaults(simulate.FaultOptions{Nodes: nodes, Interval: interval, Seed: o.Seed, Outages: true, Scale: scale, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	silent := ""
	for k := range 120 { // the first outage period: 10 minutes at scale
		for i := range nodes {
			if f.Silent(i, t0.Add(time.Duration(k)*interval)) {
				silent = simulate.NodeName(i + 1)
			}
		}
	}
	if silent == "" {
		t.Fatal("no node goes silent")
	}

	base := "http://" + httpAddr
	var failing, failEvent string
	down, up := false, false
	deadline := time.Now().Add(15 * time.Second)
	for failing == "" || failEvent == "" || !down || !up {
		if time.Now().After(deadline) {
			t.Fatalf("after 15s: failing in the store %q, health_fail event %q, %s down %v and up %v", failing, failEvent, silent, down, up)
		}
		time.Sleep(100 * time.Millisecond)
		if failing == "" {
			var q struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			}
			getJSON(t, base+"/api/v1/query?query="+url.QueryEscape("vigil_health_check_ok == 0"), &q)
			for _, r := range q.Result {
				if r.Metric["node"] == "" || r.Metric["check"] == "" || r.Metric["job"] == "" || r.Metric["instance"] == "" {
					t.Fatalf("failing check without its labels: %v", r.Metric)
				}
				failing = r.Metric["node"] + "/" + r.Metric["check"]
			}
		}
		var ev struct {
			Events []events.Event `json:"events"`
		}
		getJSON(t, base+events.PathQuery+"?kind=health_fail", &ev)
		for _, e := range ev.Events {
			if e.Node == "" || e.Labels["check"] == "" || e.Labels["reason"] == "" || e.Severity != events.SeverityCritical {
				t.Fatalf("health_fail event %+v", e)
			}
			failEvent = fmt.Sprintf("%s/%s: %s", e.Node, e.Labels["check"], e.Labels["reason"])
		}
		getJSON(t, base+events.PathQuery+"?kind=node_down,node_up&node="+silent, &ev)
		for _, e := range slices.Backward(ev.Events) { // oldest first
			down = down || e.Kind == events.KindNodeDown
			up = up || down && e.Kind == events.KindNodeUp
		}
	}
	t.Logf("failing: %s; event: %s; %s went down and up", failing, failEvent, silent)
	stop()
}

type healthSeriesHandler struct {
	wire.NopHandler
	mu     sync.Mutex
	ticks  int
	health bool
}

func (h *healthSeriesHandler) Tick(_ string, _ time.Time, d []*metric.Desc, _ []float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ticks++
	for _, x := range d {
		if strings.HasPrefix(x.Name, "vigil_health_") {
			h.health = true
		}
	}
}

// TestSimulateHealthFlags: `vigil simulate` sends the health series by
// default and none with --health=false; --outages=false is accepted.
func TestSimulateHealthFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		health bool
	}{{nil, true}, {[]string{"--health=false"}, false}, {[]string{"--outages=false"}, true}} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := &healthSeriesHandler{}
			go func() { _ = wire.Serve(ctx, ln, wire.ServerOptions{Log: slog.New(slog.DiscardHandler)}, h) }()
			done := make(chan error, 1)
			args := append([]string{"--nodes", "4", "--cpus", "1", "--interval", "20ms", "--upstream", ln.Addr().String(), "--log-level", "error"}, tc.args...)
			go func() { done <- runSimulate(ctx, args, io.Discard, io.Discard) }()
			deadline := time.Now().Add(10 * time.Second)
			for {
				h.mu.Lock()
				ticks, health := h.ticks, h.health
				h.mu.Unlock()
				if ticks >= 4*5 {
					if health != tc.health {
						t.Errorf("%d ticks, health series: %v, want %v", ticks, health, tc.health)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("only %d ticks", ticks)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
