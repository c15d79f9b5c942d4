package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/vigil-hpc/vigil/internal/store"
)

// storeStatus answers GET /api/v1/status/store: whether the store takes
// samples, and if not why (a full disk, a failed write). Queries work
// either way.
func (s *Server) storeStatus(w http.ResponseWriter, _ *http.Request) {
	type status struct {
		Writable bool   `json:"writable"`
		Reason   string `json:"reason,omitempty"` // disk_full, io_error
		Error    string `json:"error,omitempty"`
	}
	var st status
	err := s.store.Writable()
	st.Writable = err == nil
	var nw *store.NotWritableError
	if errors.As(err, &nw) {
		st.Reason, st.Error = nw.Reason, nw.Err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Status string `json:"status"`
		Data   status `json:"data"`
	}{"success", st})
}
