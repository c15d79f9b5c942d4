package grafanacheck

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseNodeExporterFull(t *testing.T) {
	b, err := os.ReadFile("testdata/node-exporter-full.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	targets, instant, ranged := 0, 0, 0
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			targets++
			if t.Instant {
				instant++
			}
			if t.Range {
				ranged++
			}
		}
	}
	// Counted with jq on the same file: 125 panels besides rows, 286
	// queries (11 hidden), 14 instant-only.
	if len(d.Panels) != 125 || targets != 286 || d.Queries() != 275 || instant != 14 || ranged != 272 {
		t.Errorf("panels %d, queries %d (%d visible, %d instant, %d range)", len(d.Panels), targets, d.Queries(), instant, ranged)
	}
	var names []string
	for _, v := range d.Vars {
		names = append(names, v.Name+"="+v.Query)
	}
	want := `ds_prometheus=|job=label_values(node_uname_info, job)|nodename=label_values(node_uname_info{job="$job"}, nodename)|node=label_values(node_uname_info{job="$job", nodename="$nodename"}, instance)`
	if got := strings.Join(names, "|"); got != want {
		t.Errorf("variables %s\nwant %s", got, want)
	}
	if d.Panels[0].Title != "Pressure" || d.Panels[0].Row != "Quick CPU / Mem / Disk" {
		t.Errorf("first panel %s", d.Panels[0].Name())
	}
}

func TestParseBad(t *testing.T) {
	for _, in := range []string{`{`, `{"templating":{"list":[{"name":"x","type":"query","query":5}]}}`, strings.Repeat(" ", maxDashboardBytes+1)} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%.40q) succeeded", in)
		}
	}
}

func TestExpand(t *testing.T) {
	to := time.Unix(1_800_000_000, 0)
	env := Env{From: to.Add(-time.Hour), To: to, ScrapeInterval: 15 * time.Second}
	p := Panel{Title: "p"}
	iv, err := env.Interval(p, Target{})
	if err != nil || iv != 5*time.Second/5*3 && iv != 15*time.Second {
		t.Errorf("interval %v %v, want 15s (1h/1000 = 3.6s, below the scrape interval)", iv, err)
	}
	if iv, _ := env.Interval(Panel{MaxDataPoints: 100}, Target{}); iv != 30*time.Second {
		t.Errorf("interval of 100 points over 1h: %v, want 36s rounded to 30s", iv)
	}
	if iv, _ := env.Interval(p, Target{Interval: "2m"}); iv != 2*time.Minute {
		t.Errorf("interval with a 2m minimum: %v", iv)
	}
	got, err := env.Expand(`rate(x{instance="$node",job="${job}",n="[[nodename]]"}[$__rate_interval]) / $__range_s + $__interval_ms`,
		map[string]string{"node": "cn01", "job": "node", "nodename": "h"}, 15*time.Second)
	want := `rate(x{instance="cn01",job="node",n="h"}[60s]) / 3600 + 15000`
	if err != nil || got != want {
		t.Errorf("Expand = %s, %v\nwant %s", got, err, want)
	}
	if _, err := env.Expand(`x{a="$nodes"}`, map[string]string{"node": "a"}, time.Second); err == nil {
		t.Error("unknown variable $nodes expanded (a prefix of it is known)")
	}
	if env.RateInterval(time.Minute) != 75*time.Second {
		t.Errorf("rate interval of 1m: %v, want 1m + 15s", env.RateInterval(time.Minute))
	}
}

func TestLabelValuesCall(t *testing.T) {
	for _, tc := range []struct{ in, sel, label string }{
		{`label_values(node_uname_info{job="node", a="b"}, instance)`, `node_uname_info{job="node", a="b"}`, "instance"},
		{` label_values(job) `, "", "job"},
	} {
		sel, label, err := labelValuesCall(tc.in)
		if err != nil || sel != tc.sel || label != tc.label {
			t.Errorf("%s: %q %q %v", tc.in, sel, label, err)
		}
	}
	if _, _, err := labelValuesCall(`query_result(up)`); err == nil {
		t.Error("query_result accepted")
	}
}

func TestKeyAndBand(t *testing.T) {
	a := Key(map[string]string{"__name__": "m", "job": "node", "instance": "cn01", "node": "cn01", "cpu": "0"})
	b := Key(map[string]string{"__name__": "m", "job": "node", "instance": "127.0.0.1:9100", "cpu": "0"})
	numa := Key(map[string]string{"__name__": "m", "job": "node", "instance": "cn01", "node": "0"})
	if a != b || a != "{__name__=m,cpu=0}" || numa != "{__name__=m,node=0}" {
		t.Errorf("keys %s %s %s", a, b, numa)
	}
	band := Band{Min: 10, Max: 20, Numbers: 3}
	for _, tc := range []struct {
		b    Band
		want bool
	}{
		{Band{Min: 15, Max: 15, Numbers: 1}, true},
		{Band{Min: 20.9, Max: 30, Numbers: 2}, true}, // within 5 % of 30
		{Band{Min: 22, Max: 30, Numbers: 2}, false},
		{Band{Min: 9.1, Max: 9.1, Numbers: 1}, true},
		{Band{Min: 8, Max: 8, Numbers: 1}, false},
		{Band{NaN: true}, false},
		{Band{Min: 1, Max: 1, Numbers: 1, NaN: true}, false},
	} {
		if got := band.Overlaps(tc.b, 0.05, 0); got != tc.want {
			t.Errorf("%v overlaps %v ±5%%: %v", band, tc.b, got)
		}
	}
	if !(Band{NaN: true}).Overlaps(Band{Min: 1, Max: 1, Numbers: 1, NaN: true}, 0, 0) {
		t.Error("bands both NaN at times do not overlap")
	}
}
