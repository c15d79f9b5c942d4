package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAMQPSettings: the top-level [amqp] table reaches the server's
// settings, --amqp overrides its url, and a bad URL is a flag error.
func TestAMQPSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(file, []byte(`[server]
data = "/file/data"

[amqp]
url = "amqp://mq1:5672/hpc"
exchange = "site"
spool_bytes = 1048576
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseFlags([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	if c.AMQP.URL != "amqp://mq1:5672/hpc" || c.AMQP.Exchange != "site" || c.AMQP.SpoolBytes != 1<<20 || c.Data != "/file/data" {
		t.Errorf("from the file: %+v", c.AMQP)
	}
	c, err = parseFlags([]string{"--config", file, "--amqp", "amqp://mq2/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.AMQP.URL != "amqp://mq2/" || c.AMQP.Exchange != "site" {
		t.Errorf("--amqp over the file: %+v", c.AMQP)
	}
	if _, err := parseFlags([]string{"--amqp", "http://mq1/"}); err == nil || !strings.Contains(err.Error(), "amqp://") {
		t.Errorf("--amqp http://: %v", err)
	}
	if c, err := parseFlags(nil); err != nil || c.AMQP.Enabled() {
		t.Errorf("default: %+v %v", c.AMQP, err)
	}
}

// A broker that is not there stops the server at start, with the URL
// (without its password) in the error, and what New opened is closed.
func TestAMQPUnreachableAtStart(t *testing.T) {
	ln, addr := freeAddrsTCP(t)
	ln.Close() // nothing listens there now
	cfg := DefaultConfig()
	cfg.Data = t.TempDir()
	cfg.AMQP.URL = "amqp://vigil:secret@" + addr + "/"
	_, err := New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "amqp: connect to amqp://vigil:xxxxx@"+addr) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("New with an unreachable broker: %v", err)
	}
}

func freeAddrsTCP(t *testing.T) (net.Listener, string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, ln.Addr().String()
}
