package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/server" // registers [server]
)

// TestOneDurationSyntax: every section reads durations the same way, Go
// and Prometheus units alike ("1d" used to be refused in [sampler]).
func TestOneDurationSyntax(t *testing.T) {
	const day = 24 * time.Hour
	for _, v := range []struct {
		text string
		want time.Duration
	}{{"1d", day}, {"1w", 7 * day}, {"1y", 365 * day}, {"1h30m", 90 * time.Minute}, {"1.5s", 1500 * time.Millisecond}, {"250ms", 250 * time.Millisecond}} {
		data := strings.ReplaceAll(`[sampler]
interval = "V"
offset = "V"
[aggregator]
interval = "V"
[plugins.load]
interval = "V"
[server]
interval = "V"
retention = "V"
[[server.remote_write]]
url = "http://127.0.0.1:1/w"
batch_send_deadline = "V"
min_backoff = "V"
max_backoff = "V"
`, "V", v.text)
		f, err := config.Parse("d.toml", []byte(data))
		if err != nil {
			t.Fatalf("%s: %v", v.text, err)
		}
		srv := f.Sections["server"].(*server.Config)
		got := map[string]time.Duration{
			"sampler.interval": f.Sampler.Interval.D(), "sampler.offset": f.Sampler.Offset.D(),
			"aggregator.interval": f.Aggregator.Interval.D(), "plugins.load.interval": f.Plugins["load"].CommonConfig().Interval.D(),
			"server.interval": srv.Interval.D(), "server.retention": srv.Retention.D(),
			"server.remote_write.batch_send_deadline": (*srv.RemoteWrite)[0].BatchSendDeadline.D(),
		}
		for k, d := range got {
			if d != v.want {
				t.Errorf("%s = %q: read %v, want %v", k, v.text, d, v.want)
			}
		}
	}
	for _, sec := range []string{"sampler", "aggregator", "server"} {
		_, err := config.Parse("neg.toml", []byte("["+sec+"]\ninterval = \"-1d\"\n"))
		if err == nil || !strings.Contains(err.Error(), "neg.toml:2:") || !strings.Contains(err.Error(), "invalid duration") {
			t.Errorf("[%s] interval = \"-1d\": err %v, want an invalid duration at neg.toml:2", sec, err)
		}
	}
}

// TestRulesNameKey: a rule broken in the file is reported at file:line
// with section and key.
func TestRulesNameKey(t *testing.T) {
	for data, want := range map[string]string{
		"[sampler]\nnode = \"a\"\ninterval = \"0s\"\n":    "x.toml:3: sampler.interval: must be at least 1ms",
		"[aggregator]\nname = \"a\"\ninterval = \"0s\"\n": "x.toml:3: aggregator.interval: must be at least 1ms",
		"[aggregator]\n\nbuffer_bytes = -1\n":             "x.toml:3: aggregator.buffer_bytes: must not be negative",
		"[aggregator]\nhttp = \"7071\"\n":                 `x.toml:2: aggregator.http: "7071": want host:port`,
		"[server]\ndata = \"/d\"\nlogs_max_bytes = -1\n":  "x.toml:3: server.logs_max_bytes: must not be negative",
		"[sampler]\nplugins = [\"load\", \"load\"]\n":     `x.toml:2: sampler.plugins: "load" listed twice`,
		"[server]\n\n\nsyslog_tls = \"127.0.0.1:6514\"\n": "x.toml:4: server.syslog_tls: needs syslog_tls_cert",
	} {
		_, err := config.Parse("x.toml", []byte(data))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", data, err, want)
		}
	}
	// "none" disables a listener, in the file as on the command line.
	if _, err := config.Parse("x.toml", []byte("[sampler]\nlisten = \"none\"\n[aggregator]\nhttp = \"none\"\n")); err != nil {
		t.Errorf("listen/http = \"none\": %v", err)
	}
}
