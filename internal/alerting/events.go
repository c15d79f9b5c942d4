package alerting

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/prometheus/rules"

	"github.com/vigil-hpc/vigil/internal/events"
)

// evalIteration evaluates a group as Prometheus does, then emits an event
// for each of its alerts that started firing or stopped since the last
// round.
func (m *Manager) evalIteration(ctx context.Context, g *rules.Group, ts time.Time) {
	rules.DefaultEvalIterationFunc(ctx, g, ts)
	now := map[uint64]firingAlert{}
	for _, r := range g.AlertingRules() {
		for _, a := range r.ActiveAlerts() {
			if a.State == rules.StateFiring {
				now[a.Labels.Hash()] = firingAlert{labels: a.Labels, annotations: a.Annotations}
			}
		}
	}
	key := rules.GroupKey(g.File(), g.Name())
	m.alertMu.Lock()
	prev := m.firing[key]
	if len(now) == 0 {
		delete(m.firing, key)
	} else {
		m.firing[key] = now
	}
	m.alertMu.Unlock()
	t := time.Now()
	for h, a := range now {
		if _, ok := prev[h]; !ok {
			m.opts.Events.Emit(alertEvent(events.KindAlertFiring, t, a))
		}
	}
	for h, a := range prev {
		if _, ok := now[h]; !ok {
			m.opts.Events.Emit(alertEvent(events.KindAlertResolved, t, a))
		}
	}
}

// dropGroups forgets the firing alerts of groups not in keep (removed by
// a reload), announcing them resolved: their rules are gone.
func (m *Manager) dropGroups(keep map[string]bool) {
	m.alertMu.Lock()
	var gone []firingAlert
	for k, as := range m.firing {
		if !keep[k] {
			for _, a := range as {
				gone = append(gone, a)
			}
			delete(m.firing, k)
		}
	}
	m.alertMu.Unlock()
	t := time.Now()
	for _, a := range gone {
		m.opts.Events.Emit(alertEvent(events.KindAlertResolved, t, a))
	}
}

// alertEvent describes an alert: node from its node label, job from its
// jobid label, severity from its severity label, summary from its summary
// annotation (else the alert's name).
func alertEvent(kind string, t time.Time, a firingAlert) events.Event {
	e := events.Event{
		Time: t, Kind: kind,
		Node:     a.labels.Get("node"),
		Job:      a.labels.Get("jobid"),
		Severity: severity(a.labels.Get("severity")),
		Summary:  a.annotations.Get("summary"),
		Labels:   a.labels.Map(),
	}
	if e.Summary == "" {
		e.Summary = a.labels.Get("alertname")
	}
	if e.Node != "" {
		e.Link = "#/node/" + e.Node
	}
	return e
}

// severity maps the usual values of an alert's severity label onto the
// event's three.
func severity(s string) string {
	switch strings.ToLower(s) {
	case "critical", "crit", "page", "error", "fatal", "emergency", "alert", "high":
		return events.SeverityCritical
	case "info", "informational", "notice", "none", "low", "debug":
		return events.SeverityInfo
	}
	return events.SeverityWarning
}
