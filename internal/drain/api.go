package drain

import (
	"encoding/json"
	"net/http"
)

// Register serves GET /api/v1/health on mux.
func (m *Manager) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/health", m.serveHealth)
}

// serveHealth answers the failing nodes and their failing checks:
// {"status":"success","data":{"nodes":{"cn1":[{"check","reason","since"}]}}}.
func (m *Manager) serveHealth(w http.ResponseWriter, _ *http.Request) {
	var v struct {
		Status string `json:"status"`
		Data   struct {
			Nodes   map[string][]Check `json:"nodes"`
			Drained map[string]Record  `json:"drained"`
		} `json:"data"`
	}
	v.Status = "success"
	v.Data.Nodes = m.AllFailing()
	v.Data.Drained = m.Drained()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
