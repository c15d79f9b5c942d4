package server

import (
	"testing"
	"time"
)

// TestSyslogRELPConfig checks the RELP key and flag and the syslog limit
// keys, and that the server starts the RELP listener from them.
func TestSyslogRELPConfig(t *testing.T) {
	cfg, err := LoadConfig("testdata/syslog.good.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SyslogRELP != "127.0.0.1:0" || cfg.SyslogMaxConns != 100 || cfg.SyslogMaxConnsPerHost != 4 ||
		cfg.SyslogIdleTimeout.D() != 5*time.Minute || cfg.SyslogFrameTimeout.D() != 10*time.Second || cfg.SyslogUDPBuffer != 1<<20 {
		t.Fatalf("config %+v", cfg)
	}
	if cfg, err = parseFlags([]string{"--syslog-relp", "127.0.0.1:0"}); err != nil || cfg.SyslogRELP != "127.0.0.1:0" {
		t.Fatalf("--syslog-relp: %+v %v", cfg, err)
	}
	cfg.Data = t.TempDir()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.logs == nil || s.logs.RELPAddr() == nil {
		t.Fatal("RELP listener not started")
	}
}
