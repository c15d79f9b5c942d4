package query

import (
	"net/http"
)

// formatQuery answers /api/v1/format_query as Prometheus does: the
// expression parsed and printed back in its canonical, indented form
// (Grafana's query editor calls it from its "format" button). The query
// goes through the same bounds as an evaluated one first.
func (a *API) formatQuery(w http.ResponseWriter, r *http.Request) {
	_, qs, ok := a.queryForm(w, r)
	if !ok {
		return
	}
	expr, e := a.parse(qs)
	if e != nil {
		a.writeError(w, e)
		return
	}
	pretty := expr.Pretty(0)
	a.writeData(w, func(b []byte) []byte { return appendString(b, pretty) }, nil, nil)
}
