package server

import (
	"net"
	"net/http"
)

// remoteSender names a remote-write sender for the series limit: its IP
// address. Headers (X-Scope-OrgID) and basic-auth user names are the
// client's to choose, so a sender varying them would get a fresh budget
// each time; behind a reverse proxy all senders share the proxy's.
func remoteSender(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
