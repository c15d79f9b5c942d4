package alerting

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/rules"
)

// The answers of /api/v1/rules and /api/v1/alerts, field for field as in
// Prometheus' web/api/v1, so Grafana and promtool read them unchanged.
type (
	apiAlert struct {
		Labels          labels.Labels `json:"labels"`
		Annotations     labels.Labels `json:"annotations"`
		State           string        `json:"state"`
		ActiveAt        *time.Time    `json:"activeAt,omitempty"`
		KeepFiringSince *time.Time    `json:"keepFiringSince,omitempty"`
		Value           string        `json:"value"`
	}
	apiGroup struct {
		Name           string    `json:"name"`
		File           string    `json:"file"`
		Rules          []any     `json:"rules"`
		Interval       float64   `json:"interval"`
		Limit          int       `json:"limit"`
		EvaluationTime float64   `json:"evaluationTime"`
		LastEvaluation time.Time `json:"lastEvaluation"`
	}
	apiAlertingRule struct {
		State          string           `json:"state"`
		Name           string           `json:"name"`
		Query          string           `json:"query"`
		Duration       float64          `json:"duration"`
		KeepFiringFor  float64          `json:"keepFiringFor"`
		Labels         labels.Labels    `json:"labels"`
		Annotations    labels.Labels    `json:"annotations"`
		Alerts         []*apiAlert      `json:"alerts"`
		Health         rules.RuleHealth `json:"health"`
		LastError      string           `json:"lastError,omitempty"`
		EvaluationTime float64          `json:"evaluationTime"`
		LastEvaluation time.Time        `json:"lastEvaluation"`
		Type           string           `json:"type"`
	}
	apiRecordingRule struct {
		Name           string           `json:"name"`
		Query          string           `json:"query"`
		Labels         labels.Labels    `json:"labels,omitempty"`
		Health         rules.RuleHealth `json:"health"`
		LastError      string           `json:"lastError,omitempty"`
		EvaluationTime float64          `json:"evaluationTime"`
		LastEvaluation time.Time        `json:"lastEvaluation"`
		Type           string           `json:"type"`
	}
)

// Register adds GET /api/v1/rules and GET /api/v1/alerts to mux.
func (m *Manager) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/rules", m.serveRules)
	mux.HandleFunc("GET /api/v1/alerts", m.serveAlerts)
}

// Alerts returns the active (pending and firing) alerts.
func (m *Manager) Alerts() []*rules.Alert {
	var out []*rules.Alert
	for _, r := range m.rules.AlertingRules() {
		out = append(out, r.ActiveAlerts()...)
	}
	return out
}

func toAPIAlerts(as []*rules.Alert) []*apiAlert {
	out := make([]*apiAlert, len(as))
	for i, a := range as {
		out[i] = &apiAlert{Labels: a.Labels, Annotations: a.Annotations, State: a.State.String(),
			ActiveAt: &a.ActiveAt, Value: strconv.FormatFloat(a.Value, 'e', -1, 64)}
		if !a.KeepFiringSince.IsZero() {
			out[i].KeepFiringSince = &a.KeepFiringSince
		}
	}
	return out
}

func (m *Manager) serveAlerts(w http.ResponseWriter, _ *http.Request) {
	writeData(w, map[string]any{"alerts": toAPIAlerts(m.Alerts())})
}

// serveRules answers as Prometheus does, with its filters: type=alert|record,
// rule_name[], rule_group[], file[] and exclude_alerts.
func (m *Manager) serveRules(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, fmt.Errorf("error parsing form values: %w", err))
		return
	}
	typ := strings.ToLower(r.Form.Get("type"))
	if typ != "" && typ != "alert" && typ != "record" {
		writeError(w, fmt.Errorf("invalid parameter \"type\": not supported value %q", typ))
		return
	}
	exclude := false
	if s := r.Form.Get("exclude_alerts"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			writeError(w, fmt.Errorf("invalid parameter \"exclude_alerts\": %w", err))
			return
		}
		exclude = b
	}
	set := func(key string) map[string]bool {
		s := map[string]bool{}
		for _, v := range r.Form[key] {
			s[v] = true
		}
		return s
	}
	names, groups, files := set("rule_name[]"), set("rule_group[]"), set("file[]")
	out := []*apiGroup{}
	for _, g := range m.rules.RuleGroups() {
		if len(groups) > 0 && !groups[g.Name()] || len(files) > 0 && !files[g.File()] {
			continue
		}
		ag := &apiGroup{Name: g.Name(), File: g.File(), Rules: []any{}, Interval: g.Interval().Seconds(), Limit: g.Limit(),
			EvaluationTime: g.GetEvaluationTime().Seconds(), LastEvaluation: g.GetLastEvaluation()}
		for _, rr := range g.Rules() {
			if len(names) > 0 && !names[rr.Name()] {
				continue
			}
			lastErr := ""
			if err := rr.LastError(); err != nil {
				lastErr = err.Error()
			}
			switch rule := rr.(type) {
			case *rules.AlertingRule:
				if typ == "record" {
					continue
				}
				var alerts []*apiAlert
				if !exclude {
					alerts = toAPIAlerts(rule.ActiveAlerts())
				}
				ag.Rules = append(ag.Rules, apiAlertingRule{State: rule.State().String(), Name: rule.Name(), Query: rule.Query().String(),
					Duration: rule.HoldDuration().Seconds(), KeepFiringFor: rule.KeepFiringFor().Seconds(), Labels: rule.Labels(),
					Annotations: rule.Annotations(), Alerts: alerts, Health: rule.Health(), LastError: lastErr,
					EvaluationTime: rule.GetEvaluationDuration().Seconds(), LastEvaluation: rule.GetEvaluationTimestamp(), Type: "alerting"})
			case *rules.RecordingRule:
				if typ == "alert" {
					continue
				}
				ag.Rules = append(ag.Rules, apiRecordingRule{Name: rule.Name(), Query: rule.Query().String(), Labels: rule.Labels(),
					Health: rule.Health(), LastError: lastErr, EvaluationTime: rule.GetEvaluationDuration().Seconds(),
					LastEvaluation: rule.GetEvaluationTimestamp(), Type: "recording"})
			}
		}
		if len(ag.Rules) > 0 {
			out = append(out, ag)
		}
	}
	writeData(w, map[string]any{"groups": out})
}

func writeData(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Status string `json:"status"`
		Data   any    `json:"data"`
	}{"success", data})
}

func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", "bad_data", err.Error()})
}
