package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

// reload is POST /-/reload: the rule files read again, as SIGHUP does.
// A bad file answers 500 with its file:line, and the rules loaded before
// keep running.
func (s *Server) reload(w http.ResponseWriter, _ *http.Request) {
	if err := s.rules.Reload(); err != nil {
		http.Error(w, "failed to reload rules: "+err.Error(), http.StatusInternalServerError)
	}
}

// notifyHUP catches SIGHUP (which would otherwise end the process) from
// now on; reloadOnHUP takes them.
func notifyHUP() chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup
}

// reloadOnHUP reloads the rules on each SIGHUP until ctx ends.
func (s *Server) reloadOnHUP(ctx context.Context, hup chan os.Signal) {
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			s.log.Info("SIGHUP: reloading the rule files")
			_ = s.rules.Reload() // logged by Reload
		}
	}
}

// externalURL is how alerts link back to this server (their generator
// URL): http://HOST:PORT of --http, the host name for a wildcard address.
func externalURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
