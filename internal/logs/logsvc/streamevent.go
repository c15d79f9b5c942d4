package logsvc

import (
	"strconv"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/events"
)

// maxSummaryTemplate bounds the template quoted in an event's summary.
const maxSummaryTemplate = 120

// patternStreamEvent is a new pattern as the server's one event stream
// has it; the link opens the dashboard's logs view filtered to it.
func patternStreamEvent(e *Event) events.Event {
	id := strconv.FormatUint(e.Pattern, 10)
	tmpl := e.Template
	if len(tmpl) > maxSummaryTemplate {
		n := maxSummaryTemplate
		for n > 0 && !utf8.RuneStart(tmpl[n]) {
			n--
		}
		tmpl = tmpl[:n]
	}
	app := labelValue(e.App, maxAppLabel)
	if app == "" {
		app = "-"
	}
	host := labelValue(e.Host, maxHostLabel)
	labels := map[string]string{"pattern": id}
	if e.App != "" {
		labels["app"] = app
	}
	return events.Event{
		Time:     e.Time,
		Kind:     events.KindLogPattern,
		Node:     host,
		Severity: events.SeverityInfo,
		Summary:  "new log pattern " + id + " from " + app + "@" + host + ": " + tmpl,
		Labels:   labels,
		Link:     "#/logs?q=pattern%3A" + id,
	}
}
