// Package grafanacheck replays a Grafana dashboard against a Prometheus
// HTTP API the way Grafana would: it resolves the dashboard's template
// variables with their label_values queries, expands Grafana's interval
// variables, runs every panel's queries as instant or range queries as the
// panel asks, and says per panel whether it shows data, nothing or an
// error. Tests use it to hold Vigil to what Prometheus shows for the same
// host.
package grafanacheck

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Dashboard is the part of a Grafana dashboard's JSON model a replay needs.
type Dashboard struct {
	Title   string
	UID     string
	Version int
	Panels  []Panel // every panel with queries, rows flattened away
	Vars    []Variable
}

// Panel is one panel with its queries.
type Panel struct {
	ID            int
	Title, Type   string
	Row           string // title of the row it sits in, if any
	MaxDataPoints int    // 0: the replay's default
	Interval      string // the panel's minimum interval, "" if none
	Targets       []Target
}

// Target is one query of a panel.
type Target struct {
	RefID    string
	Expr     string
	Instant  bool // evaluated at the end of the range
	Range    bool // evaluated over the range
	Hide     bool
	Interval string // minimum interval of this query, "" if none
}

// Variable is one template variable.
type Variable struct {
	Name, Type string
	Query      string // the label_values(...) of a query variable
	Sort       int    // Grafana's sort setting: 0 none, 1/3/5 ascending
}

// Name is how reports call a panel: row / title (#id).
func (p Panel) Name() string {
	if p.Row != "" {
		return fmt.Sprintf("%s / %s (#%d)", p.Row, p.Title, p.ID)
	}
	return fmt.Sprintf("%s (#%d)", p.Title, p.ID)
}

// maxDashboardBytes bounds the JSON Parse accepts; the largest public node
// dashboards are under 1 MB.
const maxDashboardBytes = 16 << 20

type jsonPanel struct {
	ID            int         `json:"id"`
	Title         string      `json:"title"`
	Type          string      `json:"type"`
	MaxDataPoints int         `json:"maxDataPoints"`
	Interval      string      `json:"interval"`
	Panels        []jsonPanel `json:"panels"`
	Targets       []struct {
		RefID    string `json:"refId"`
		Expr     string `json:"expr"`
		Instant  *bool  `json:"instant"`
		Range    *bool  `json:"range"`
		Hide     bool   `json:"hide"`
		Interval string `json:"interval"`
	} `json:"targets"`
}

// Parse reads a dashboard's JSON model (as exported by Grafana or
// published on grafana.com).
func Parse(b []byte) (*Dashboard, error) {
	if len(b) > maxDashboardBytes {
		return nil, fmt.Errorf("dashboard: %d bytes, more than %d", len(b), maxDashboardBytes)
	}
	var raw struct {
		Title      string      `json:"title"`
		UID        string      `json:"uid"`
		Version    int         `json:"version"`
		Panels     []jsonPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
				Sort  int             `json:"sort"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	d := &Dashboard{Title: raw.Title, UID: raw.UID, Version: raw.Version}
	for _, v := range raw.Templating.List {
		nv := Variable{Name: v.Name, Type: v.Type, Sort: v.Sort}
		if v.Type == "query" {
			// The query is a string in old models, {"query": ...} in new.
			var s string
			var o struct{ Query string }
			switch {
			case json.Unmarshal(v.Query, &s) == nil:
				nv.Query = s
			case json.Unmarshal(v.Query, &o) == nil:
				nv.Query = o.Query
			default:
				return nil, fmt.Errorf("dashboard: variable %s: query is neither a string nor an object: %s", v.Name, v.Query)
			}
		}
		d.Vars = append(d.Vars, nv)
	}
	// An expanded row is followed by its panels; a collapsed one holds
	// them.
	var walk func(ps []jsonPanel, row string)
	walk = func(ps []jsonPanel, row string) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				walk(p.Panels, row)
				continue
			}
			np := Panel{ID: p.ID, Title: p.Title, Type: p.Type, Row: row, MaxDataPoints: p.MaxDataPoints, Interval: p.Interval}
			for _, t := range p.Targets {
				nt := Target{RefID: t.RefID, Expr: t.Expr, Hide: t.Hide, Interval: t.Interval}
				// Grafana: a query is a range query unless it says
				// instant and not range; it may be both.
				nt.Instant = t.Instant != nil && *t.Instant
				nt.Range = t.Range == nil && !nt.Instant || t.Range != nil && *t.Range
				np.Targets = append(np.Targets, nt)
			}
			d.Panels = append(d.Panels, np)
			walk(p.Panels, row)
		}
	}
	walk(raw.Panels, "")
	return d, nil
}

// Queries counts the visible queries of d.
func (d *Dashboard) Queries() int {
	n := 0
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			if !t.Hide {
				n++
			}
		}
	}
	return n
}

// labelValuesCall splits label_values(selector, label) or
// label_values(label) into its arguments.
func labelValuesCall(q string) (selector, label string, err error) {
	q = strings.TrimSpace(q)
	inner, ok := strings.CutPrefix(q, "label_values(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return "", "", fmt.Errorf("variable query %q: only label_values(...) is supported", q)
	}
	inner = strings.TrimSuffix(inner, ")")
	i := strings.LastIndexByte(inner, ',')
	if i < 0 {
		return "", strings.TrimSpace(inner), nil
	}
	return strings.TrimSpace(inner[:i]), strings.TrimSpace(inner[i+1:]), nil
}
