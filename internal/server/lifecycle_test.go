package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freeAddrs returns loopback addresses free a moment ago for TCP and UDP.
func freeAddrs(t *testing.T) (tcp, tcp2, udp string) {
	t.Helper()
	var tcps []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tcps = append(tcps, ln.Addr().String())
		defer ln.Close()
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return tcps[0], tcps[1], pc.LocalAddr().String()
}

// requireBindable fails unless every address can be bound again, i.e. no
// listener of the server is left open.
func requireBindable(t *testing.T, tcp []string, udp string) {
	t.Helper()
	for _, a := range tcp {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("tcp %s still bound: %v", a, err)
			continue
		}
		ln.Close()
	}
	pc, err := net.ListenPacket("udp", udp)
	if err != nil {
		t.Errorf("udp %s still bound: %v", udp, err)
		return
	}
	pc.Close()
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(ents)
}

func syslogOn(tcp, relp, udp string) func(*Config) {
	return func(c *Config) { c.SyslogTCP, c.SyslogRELP, c.SyslogUDP = tcp, relp, udp }
}

// New failing after it opened things (a bad topology file, a syslog port
// taken) leaves no listener bound and no file open: the stores are
// closed, so the data directory opens again.
func TestFailedNewLeaksNothing(t *testing.T) {
	tcp, relp, udp := freeAddrs(t)
	dir := t.TempDir()
	badTopo := filepath.Join(dir, "topology")
	if err := os.WriteFile(badTopo, []byte("rack01 cn[001-004]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		name, want string
		mod        func(*Config)
	}{
		{"bad topology", "GROUP: host-list", func(c *Config) { syslogOn(tcp, relp, udp)(c); c.Topology = badTopo }},
		{"syslog port taken", "address already in use", syslogOn(tcp, taken.Addr().String(), udp)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Data = filepath.Join(dir, "data")
			tc.mod(&cfg)
			try := func() {
				if s, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
					if s != nil {
						s.Close()
					}
					t.Fatalf("New: err %v, want one saying %q", err, tc.want)
				}
			}
			try() // the first run may set up process-wide state (epoll, ...)
			before := openFDs(t)
			for range 3 {
				try()
			}
			if after := openFDs(t); after > before {
				t.Errorf("%d open files after 3 failed starts, %d before", after, before)
			}
			requireBindable(t, []string{tcp, relp}, udp)
			cfg = DefaultConfig()
			cfg.Data = filepath.Join(dir, "data")
			s, err := New(cfg, nil)
			if err != nil {
				t.Fatalf("data directory still locked: %v", err)
			}
			s.Close()
		})
	}
}

// A server built but never served (say its HTTP port was taken) closes
// its log service too: listeners and log store.
func TestCloseWithoutServeClosesLogs(t *testing.T) {
	tcp, relp, udp := freeAddrs(t)
	cfg := DefaultConfig()
	cfg.Data = t.TempDir()
	syslogOn(tcp, relp, udp)(&cfg)
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	requireBindable(t, []string{tcp, relp}, udp)
	// The log store is closed: it opens again.
	s, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Stopping the server while a dashboard's live stream, a log tail or an event stream is
// open returns nil within a second, not after the HTTP grace period with
// an error.
func TestStopWithLiveStreamsOpen(t *testing.T) {
	for _, path := range []string{"/api/web/live?expr=up", "/api/v1/logs/tail", "/api/v1/events/stream"} {
		t.Run(strings.Split(path, "?")[0], func(t *testing.T) {
			tcp, _, _ := freeAddrs(t)
			cfg := DefaultConfig()
			cfg.Data = t.TempDir()
			cfg.SyslogTCP = tcp
			s, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx, ln, nil) }()

			resp, err := http.Get("http://" + ln.Addr().String() + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("stream: %s %q", resp.Status, resp.Header.Get("Content-Type"))
			}
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
				}
			}()

			cancel()
			start := time.Now()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve = %v, want nil", err)
				}
				if took := time.Since(start); took > time.Second {
					t.Errorf("Serve took %v to return, want < 1s", took)
				}
			case <-time.After(time.Second):
				t.Fatal("Serve still running 1s after cancel with a stream open")
			}
			select {
			case <-ended:
			case <-time.After(time.Second):
				t.Error("stream still open after Serve returned")
			}
		})
	}
}
