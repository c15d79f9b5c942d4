package fabric

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
)

// synthPort is one switch port of the synthetic fabric and the rates its
// counters grow at.
type synthPort struct {
	sweeper                  string // node label of the host sweeping it
	sw, guid, port           string
	remote, rguid, rport, rt string
	up                       bool
	tx, rx, wait             float64 // per second
	symbol, discards, rcvErr float64 // per second
}

// synthFabric is a two-level fat tree: spine01..02 above leaf01..03, each
// leaf with two hosts (cn1..cn6) and one link to each spine; leaf01 and
// spine01 are swept by cn1, leaf02 by cn3, leaf03 and spine02 by cn5, as
// the ibnet sweep splits a fabric.
func synthFabric() []synthPort {
	guid := guidOf
	sweeper := map[string]string{"leaf01": "cn1", "spine01": "cn1", "leaf02": "cn3", "leaf03": "cn5", "spine02": "cn5"}
	var ps []synthPort
	for l := 1; l <= 3; l++ {
		leaf := fmt.Sprintf("leaf%02d", l)
		for h := 1; h <= 2; h++ {
			host := fmt.Sprintf("cn%d", (l-1)*2+h)
			ps = append(ps, synthPort{sweeper: sweeper[leaf], sw: leaf, guid: guid(leaf), port: fmt.Sprint(h),
				remote: host + " HCA-1", rguid: guid(host), rport: "1", rt: "ca", up: true, tx: 1e6, rx: 1e6})
		}
		for s := 1; s <= 2; s++ {
			spine := fmt.Sprintf("spine%02d", s)
			ps = append(ps,
				synthPort{sweeper: sweeper[leaf], sw: leaf, guid: guid(leaf), port: fmt.Sprint(2 + s),
					remote: spine, rguid: guid(spine), rport: fmt.Sprint(l), rt: "switch", up: true, tx: 2e6, rx: 2e6},
				synthPort{sweeper: sweeper[spine], sw: spine, guid: guid(spine), port: fmt.Sprint(l),
					remote: leaf, rguid: guid(leaf), rport: fmt.Sprint(2 + s), rt: "switch", up: true, tx: 2e6, rx: 2e6})
		}
	}
	for i := range ps {
		p := &ps[i]
		switch {
		case p.sw == "leaf02" && p.port == "3": // congested toward spine01
			p.wait = 1000
		case p.sw == "leaf01" && p.port == "1": // a bad cable to cn1
			p.symbol, p.discards, p.rcvErr = 3, 2, 4
		case p.sw == "leaf03" && p.port == "4": // the busiest link
			p.tx, p.rx = 5e9, 1e9
		case p.sw == "leaf03" && p.port == "3": // down, as is its other end
			p.up, p.tx, p.rx = false, 0, 0
		case p.sw == "spine01" && p.port == "3":
			p.up, p.tx, p.rx = false, 0, 0
		}
	}
	return ps
}

// writeFabric appends the contract's series for ps into st, one tick a
// second per sweeping host for span up to end, as ingest does.
func writeFabric(t *testing.T, st *store.Store, ps []synthPort, end time.Time, span time.Duration) {
	t.Helper()
	type hostSeries struct {
		descs []*metric.Desc
		rates []float64 // per desc: growth per second; NaN: a constant
		vals  []float64
	}
	hosts := map[string]*hostSeries{}
	infoDone := map[string]bool{}
	for _, p := range ps {
		h := hosts[p.sweeper]
		if h == nil {
			h = &hostSeries{}
			hosts[p.sweeper] = h
		}
		lbl := []string{"switch_guid", p.guid, "switch", p.sw, "port", p.port, "remote_guid", p.rguid, "remote", p.remote,
			"remote_port", p.rport, "remote_type", p.rt, "remote_lid", "7", "lid", "3"}
		add := func(name string, typ metric.Type, v, rate float64, extra ...string) {
			h.descs = append(h.descs, metric.NewDesc(name, "", typ, append(slices.Clone(lbl), extra...)...))
			h.vals = append(h.vals, v)
			h.rates = append(h.rates, rate)
		}
		up := 0.0
		if p.up {
			up = 1
		}
		add(MetricPortInfo, metric.Gauge, 1, math.NaN(), "rate", "100 Gb/s", "width", "4x", "speed", "EDR")
		add(MetricPortUp, metric.Gauge, up, math.NaN())
		add(MetricPortRate, metric.Gauge, 12.5e9, math.NaN())
		add(MetricXmitData, metric.Counter, 1e12, p.tx)
		add(MetricRcvData, metric.Counter, 1e12, p.rx)
		add(MetricXmitWait, metric.Counter, 0, p.wait)
		add("vigil_ib_port_symbol_errors_total", metric.Counter, 5, p.symbol)
		add("vigil_ib_port_transmit_discards_total", metric.Counter, 0, p.discards)
		add("vigil_ib_port_receive_errors_total", metric.Counter, 1, p.rcvErr)
		// The optional details break the counters above down (as the
		// sweep emits them): all discards for the neighbour's MTU, all
		// receive errors local physical ones. Not counted twice.
		add("vigil_ib_port_transmit_discards_neighbor_mtu_total", metric.Counter, 0, p.discards)
		add("vigil_ib_port_receive_local_phy_errors_total", metric.Counter, 0, p.rcvErr)
		add("vigil_ib_port_vl_transmit_wait_total", metric.Counter, 0, p.wait, "vl", "0")
		add("vigil_ib_port_link_error_recovery_total", metric.Counter, 0, 50) // not an error rate
		if !infoDone[p.sw] {
			infoDone[p.sw] = true
			lv := LevelLeaf
			if strings.HasPrefix(p.sw, "spine") {
				lv = LevelSpine
			}
			h.descs = append(h.descs, metric.NewDesc(MetricSwitchInfo, "", metric.Gauge, "switch_guid", p.guid, "switch", p.sw, "level", lv, "lid", "3"))
			h.vals = append(h.vals, 1)
			h.rates = append(h.rates, math.NaN())
		}
	}
	for ts := end.Add(-span); !ts.After(end); ts = ts.Add(time.Second) {
		for node, h := range hosts {
			if err := st.AppendTick(node, ts, h.descs, h.vals, true); err != nil {
				t.Fatal(err)
			}
			for i, r := range h.rates {
				if !math.IsNaN(r) {
					h.vals[i] += r
				}
			}
		}
	}
}

type fixture struct {
	svc *Service
	idx *jobs.Index
	now time.Time
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Job: "node", MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	idx, err := jobs.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	now := time.Now().Truncate(time.Second)
	writeFabric(t, st, synthFabric(), now, 90*time.Second)
	for _, j := range []*jobs.Job{
		{ID: "10", User: "alice", Nodes: []string{"cn3", "cn4"}, State: jobs.StateRunning, Start: now.Add(-time.Hour)},
		{ID: "11", User: "bob", Nodes: []string{"cn1", "cn5"}, State: jobs.StateRunning, Start: now.Add(-time.Hour)},
		{ID: "12", User: "carol", Nodes: []string{"cn3"}, State: jobs.StateCompleted, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour)},
	} {
		if err := idx.Upsert(j); err != nil {
			t.Fatal(err)
		}
	}
	svc := New(Options{Query: query.New(st, query.Options{}), Jobs: idx, Now: func() time.Time { return now }})
	return fixture{svc: svc, idx: idx, now: now}
}

func TestTopology(t *testing.T) {
	fx := newFixture(t)
	f, err := fx.svc.Read(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range f.Switches {
		got = append(got, fmt.Sprintf("%s/%s/%d/%s", s.Name, s.Level, s.NodeCount, strings.Join(s.Nodes, ",")))
	}
	want := []string{"spine01/spine/6/", "spine02/spine/6/", "leaf01/leaf/2/cn1,cn2", "leaf02/leaf/2/cn3,cn4", "leaf03/leaf/2/cn5,cn6"}
	if !slices.Equal(got, want) {
		t.Fatalf("switches:\n got %v\nwant %v", got, want)
	}
	if len(f.Links) != 18 {
		t.Fatalf("%d links, want 18 (6 CA ports, 12 switch-port ends)", len(f.Links))
	}
	byName := map[string]Link{}
	for _, l := range f.Links {
		byName[l.Name] = l
	}
	l, ok := byName["leaf03 p4 → spine02 p3"]
	if !ok {
		t.Fatalf("no link leaf03 p4 → spine02 p3 in %v", f.Links)
	}
	if !near(l.TxBytes, 5e9) || !near(l.RxBytes, 1e9) || !near(l.Utilization, 0.4) || !l.Up || l.Rate != "100 Gb/s" {
		t.Fatalf("leaf03 p4: %+v, want tx 5e9, rx 1e9, utilization 0.4, up", l)
	}
	if d := byName["leaf03 p3 → spine01 p3"]; d.Up {
		t.Fatalf("leaf03 p3 is down but reads up: %+v", d)
	}
	if c := byName["leaf01 p1 → cn1 HCA-1 p1"]; c.Host != "cn1" || !near(c.Errors, 9) {
		t.Fatalf("leaf01 p1: %+v, want host cn1, 9 errors/s (symbol 3 + discards 2 + receive 4; link_error_recovery and the details not counted)", c)
	}
}

func TestTop(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		by, first string
		value     float64
		jobs      string
	}{
		{ByXmitWait, "leaf02 p3 → spine01 p2", 1000, "10:2"},
		{ByErrors, "leaf01 p1 → cn1 HCA-1 p1", 9, "11:1"},
		{ByBytes, "leaf03 p4 → spine02 p3", 6e9, "11:1"},
	} {
		top, err := fx.svc.Top(ctx, time.Minute, tc.by, 3, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(top.Links) != 3 || top.Total != 18 {
			t.Fatalf("by %s: %d links of %d, want 3 of 18", tc.by, len(top.Links), top.Total)
		}
		l := top.Links[0]
		if l.Name != tc.first || !near(l.Value, tc.value) || jobList(l.Jobs) != tc.jobs {
			t.Fatalf("by %s: first %q value %g jobs %s, want %q %g %s", tc.by, l.Name, l.Value, jobList(l.Jobs), tc.first, tc.value, tc.jobs)
		}
		for i := 1; i < len(top.Links); i++ {
			if top.Links[i].Value > top.Links[i-1].Value {
				t.Fatalf("by %s: not ordered: %v", tc.by, top.Links)
			}
		}
	}
	// A spine's down-link carries the jobs below the leaf it leads to; an
	// up-link from a spine to nothing higher carries nobody.
	top, err := fx.svc.Top(ctx, time.Minute, ByBytes, MaxTopLimit, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range top.Links {
		want := map[string]string{"spine01 p2 → leaf02 p3": "10:2", "spine02 p1 → leaf01 p4": "11:1", "leaf02 p4 → spine02 p2": "10:2",
			"leaf01 p3 → spine01 p1": "11:1", "leaf01 p2 → cn2 HCA-1 p1": ""}[l.Name]
		if want == "" && l.Name != "leaf01 p2 → cn2 HCA-1 p1" {
			continue
		}
		if got := jobList(l.Jobs); got != want {
			t.Errorf("%s: jobs %q, want %q", l.Name, got, want)
		}
	}
}

func TestTopOfJob(t *testing.T) {
	fx := newFixture(t)
	top, err := fx.svc.Top(context.Background(), time.Minute, ByXmitWait, 100, "10")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range top.Links {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	want := []string{"leaf02 p1 → cn3 HCA-1 p1", "leaf02 p2 → cn4 HCA-1 p1", "leaf02 p3 → spine01 p2", "leaf02 p4 → spine02 p2",
		"spine01 p2 → leaf02 p3", "spine02 p2 → leaf02 p4"}
	if !slices.Equal(names, want) {
		t.Fatalf("links of job 10:\n got %q\nwant %q", names, want)
	}
	if top.Links[0].Name != "leaf02 p3 → spine01 p2" {
		t.Fatalf("job 10's worst link is %q, want the congested leaf02 p3", top.Links[0].Name)
	}
	if _, err := fx.svc.Top(context.Background(), time.Minute, ByXmitWait, 100, "999"); err == nil {
		t.Fatal("no error for an unknown job")
	}
}

func TestHTTP(t *testing.T) {
	fx := newFixture(t)
	mux := http.NewServeMux()
	fx.svc.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/api/v1/fabric?window=30s", 200, `"window":"30s"`},
		{"/api/v1/fabric/top?by=errors&limit=1", 200, `"name":"leaf01 p1 → cn1 HCA-1 p1"`},
		{"/api/v1/fabric/top?job=10&limit=1", 200, `"job":"10"`},
		{"/api/v1/fabric/top?job=404", 404, "no such job"},
		{"/api/v1/fabric/top?link=" + guidOf("spine01") + "/2", 200, `"jobs":[{"id":"10","user":"alice","nodes":2}]}],"total":1}`},
		{"/api/v1/fabric/top?link=x", 400, "SWITCH_GUID/PORT"},
		{"/api/v1/fabric/top?by=latency", 400, "want xmit_wait, errors or bytes"},
		{"/api/v1/fabric/top?limit=0", 400, "limit"},
		{"/api/v1/fabric?window=1ms", 400, "window"},
		{"/api/v1/fabric?window=1d", 400, "window"},
		{"/api/v1/fabric/top?job=1x", 400, "job"},
		{"/api/v1/fabric?by=a&by=b", 400, "one value"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = fmt.Fprint(&body, readAll(t, resp))
		if resp.StatusCode != tc.status || !strings.Contains(body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.path, resp.StatusCode, body.String(), tc.status, tc.want)
		}
		if resp.StatusCode == 200 && !json.Valid([]byte(body.String())) {
			t.Errorf("%s: invalid JSON", tc.path)
		}
	}
}

func TestNatural(t *testing.T) {
	in := []string{"leaf10", "leaf2", "leaf1", "spine", "leaf02x", "leaf02"}
	slices.SortFunc(in, natural)
	if want := []string{"leaf1", "leaf2", "leaf02", "leaf02x", "leaf10", "spine"}; !slices.Equal(in, want) {
		t.Fatalf("%v, want %v", in, want)
	}
}

func FuzzParseParams(f *testing.F) {
	for _, s := range []string{"window=1m&by=bytes&limit=5&job=12_3", "window=-1s", "limit=99999999999999999999", "by=%00", "window=1y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := urlParse(raw)
		if err != nil {
			return
		}
		p, _, err := ParseParams(q)
		if err != nil {
			return
		}
		if p.Window < MinWindow || p.Window > MaxWindow || p.Limit < 1 || p.Limit > MaxTopLimit {
			t.Fatalf("%q gave out-of-bounds %+v", raw, p)
		}
		if _, err := ParseBy(p.By); err != nil {
			t.Fatalf("%q gave by %q", raw, p.By)
		}
	})
}

func FuzzHostOf(f *testing.F) {
	for _, s := range []string{"cn001 HCA-1", "", " \tx", "lustre-oss01\tmlx5_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := HostOf(s)
		if strings.ContainsAny(h, " \t") || !strings.Contains(s, h) {
			t.Fatalf("HostOf(%q) = %q", s, h)
		}
	})
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func jobList(js []JobRef) string {
	var s []string
	for _, j := range js {
		s = append(s, fmt.Sprintf("%s:%d", j.ID, j.Nodes))
	}
	return strings.Join(s, ",")
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func urlParse(s string) (url.Values, error) { return url.ParseQuery(s) }

func guidOf(s string) string { return fmt.Sprintf("0x0002c9020000%04x", len(s)*100+int(s[len(s)-1])) }

// TestCache: a second read within CacheFor is the same answer, a later
// one a new read; another window is its own.
func TestCache(t *testing.T) {
	fx := newFixture(t)
	now := fx.now
	fx.svc.o.Now = func() time.Time { return now }
	ctx := context.Background()
	a, err := fx.svc.Read(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := fx.svc.Read(ctx, time.Minute)
	c, _ := fx.svc.Read(ctx, 30*time.Second)
	now = now.Add(CacheFor)
	d, _ := fx.svc.Read(ctx, time.Minute)
	if a != b || a == c || a == d {
		t.Fatalf("cache: same window within %s shared %v, other window %v, later %v; want true, false, false", CacheFor, a == b, a == c, a == d)
	}
}

// TestGzip: a client taking gzip gets the same answer compressed.
func TestGzip(t *testing.T) {
	fx := newFixture(t)
	mux := http.NewServeMux()
	fx.svc.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(enc string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/fabric", nil)
		req.Header.Set("Accept-Encoding", enc)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, readAll(t, resp)
	}
	plainResp, plain := get("identity")
	zResp, z := get("br, gzip;q=0.8")
	if plainResp.Header.Get("Content-Encoding") != "" || zResp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("encodings %q, %q", plainResp.Header.Get("Content-Encoding"), zResp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(strings.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	unz, err := io.ReadAll(zr)
	if err != nil || string(unz) != plain || len(z) >= len(plain) {
		t.Fatalf("gzip answer: %v, %d bytes for %d plain, same after decompressing: %v", err, len(z), len(plain), string(unz) == plain)
	}
	if _, off := get("gzip;q=0"); strings.HasPrefix(off, "\x1f\x8b") {
		t.Fatal("gzip;q=0 answered gzipped")
	}
}

// TestLevelsInferred: without vigil_ib_switch_info a switch with node
// ports is a leaf, one linked to a leaf a spine, one linked only to
// spines a core; nodes below add up the tree; a switch seen only as a
// remote end is listed, not swept.
func TestLevelsInferred(t *testing.T) {
	l := func(sw, port, remote, rport, typ string) Link {
		k := Link{SwitchGUID: "g" + sw, Switch: sw, Port: port, RemoteGUID: "g" + strings.Fields(remote)[0], Remote: remote, RemotePort: rport, RemoteType: typ}
		if typ == "ca" {
			k.Host = HostOf(remote)
		}
		return k
	}
	links := []Link{
		l("L1", "1", "a HCA-1", "1", "ca"), l("L1", "2", "b HCA-1", "1", "ca"), l("L1", "3", "S1", "1", "switch"),
		l("L2", "1", "c HCA-1", "1", "ca"), l("L2", "3", "S1", "2", "switch"),
		l("S1", "1", "L1", "3", "switch"), l("S1", "2", "L2", "3", "switch"), l("S1", "9", "C1", "1", "switch"),
		l("C1", "1", "S1", "9", "switch"), l("C1", "2", "S2", "1", "switch"),
	}
	sws, trunc := switches(nil, links, false)
	var got []string
	for _, s := range sws {
		got = append(got, fmt.Sprintf("%s/%s/%d/%v", s.Name, s.Level, s.NodeCount, s.Swept))
	}
	want := []string{"C1/core/3/true", "S1/spine/3/true", "S2/spine/0/false", "L1/leaf/2/true", "L2/leaf/1/true"}
	if trunc || !slices.Equal(got, want) {
		t.Fatalf("switches %v (truncated %v), want %v", got, trunc, want)
	}
	f := &Fabric{Switches: sws, Links: links}
	running := []*jobs.Job{{ID: "1", Nodes: []string{"c"}}}
	top := TopOf(f, running, ByBytes, 100, nil, "")
	for _, tl := range top.Links {
		if tl.Name == LinkName("C1", "1", "S1", "9") && (tl.NodesBelow != 3 || tl.JobCount != 1) {
			t.Fatalf("core's down-link to S1: %d nodes below, %d jobs; want 3 and 1", tl.NodesBelow, tl.JobCount)
		}
		if tl.Name == LinkName("S1", "9", "C1", "1") && tl.NodesBelow != 3 {
			t.Fatalf("S1's up-link: %d nodes below, want 3", tl.NodesBelow)
		}
	}
}
