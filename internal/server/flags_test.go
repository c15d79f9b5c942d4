package server

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
)

// parseFlags configures the server from args as `vigil server` does.
func parseFlags(args []string) (Config, error) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := config.ParseFlags(fs, args, "", FromFile)
	if err != nil {
		return Config{}, err
	}
	return *c, nil
}

// TestFlagsOverFile: a flag given overrides the file, the file overrides
// the defaults, and an unset flag leaves the file's value.
func TestFlagsOverFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(file, []byte(`[server]
data = "/file/data"
retention = "1w"
max_future = "1d"
listen = "127.0.0.1:7000"
query_max_samples = 5
remote_write = [{url = "http://127.0.0.1:1/file"}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(Config) bool
	}{
		{"defaults", nil, func(c Config) bool {
			return c.Data == DefaultData && c.HTTP == DefaultHTTP && c.Retention == DefaultConfig().Retention && c.RemoteWrite == nil
		}},
		{"file", []string{"--config", file}, func(c Config) bool {
			return c.Data == "/file/data" && c.Retention.D() == 7*24*time.Hour && c.MaxFuture.D() == 24*time.Hour &&
				c.Listen == "127.0.0.1:7000" && c.QueryMaxSamples == 5 && c.HTTP == DefaultHTTP &&
				c.RemoteWrite != nil && len(*c.RemoteWrite) == 1 && (*c.RemoteWrite)[0].URL == "http://127.0.0.1:1/file"
		}},
		{"flags over file", []string{"--retention", "2d", "--config", file, "--data", "/flag", "--max-future", "1y",
			"--remote-write", "http://127.0.0.1:1/a,http://127.0.0.1:1/b", "--remote-write", "http://127.0.0.1:1/c"}, func(c Config) bool {
			return c.Data == "/flag" && c.Retention.D() == 48*time.Hour && c.MaxFuture.D() == 365*24*time.Hour &&
				c.Listen == "127.0.0.1:7000" && c.QueryMaxSamples == 5 && len(*c.RemoteWrite) == 3 && (*c.RemoteWrite)[2].URL == "http://127.0.0.1:1/c"
		}},
		{"key alias", []string{"--config", file, "--key-file", "/k"}, func(c Config) bool { return c.KeyFile == "/k" }},
		{"log flags", []string{"--log-level", "debug", "--log-format", "json"}, func(c Config) bool {
			return c.Log.Level == "debug" && c.Log.Format == "json"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("%v: got %+v", tc.args, c)
			}
		})
	}
}

// TestFlagErrorsNameFlag: a bad value given by flag is reported against
// the flag; in the file, against file:line and the key.
func TestFlagErrorsNameFlag(t *testing.T) {
	for args, want := range map[string]string{
		"--query-max-concurrency -1":  "--query-max-concurrency: must not be negative",
		"--retention-bytes -5":        "--retention-bytes: must not be negative",
		"--http ":                     "--http: empty address",
		"--syslog-tls 127.0.0.1:6514": "--syslog-tls: needs syslog_tls_cert",
		"--log-level loud":            `--log-level "loud"`,
		"--retention 15days":          `invalid value "15days" for flag -retention`,
	} {
		_, err := parseFlags(strings.SplitN(args, " ", 2))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
	file := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(file, []byte("[server]\ndata = \"/d\"\nquery_max_concurrent = -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := parseFlags([]string{"--config", file})
	if err == nil || !strings.Contains(err.Error(), "bad.toml:3: server.query_max_concurrent: must not be negative") {
		t.Errorf("file error %v, want file:line and key", err)
	}
}
