package samplerd

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/logging"
)

func parseFlags(args []string) (*Config, error) {
	fs := flag.NewFlagSet("sampler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return config.ParseFlags(fs, args, ConfigUsage, FromFile)
}

// run starts the daemon from args as `vigil sampler` does.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	log, err := logging.New(stderr, c.Log)
	if err != nil {
		return err
	}
	d, err := New(c, log)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// TestFlagsOverFile: a flag given overrides the file, the file overrides
// the defaults, an unset flag leaves the file's value.
func TestFlagsOverFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(file, []byte(`[sampler]
node = "filenode"
root = "/fileroot"
interval = "1d"
offset = "250ms"
listen = "127.0.0.1:9200"
plugins = ["load", "cpu"]
upstream = ["127.0.0.1:7000", "127.0.0.1:7001"]
upstream_delay = "1s"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(*Config) bool
	}{
		{"defaults", nil, func(c *Config) bool {
			return c.Interval.D() == time.Second && c.Offset == 0 && c.Root == "" && c.Plugins == nil && c.GOMAXPROCS == 1 && c.Log.Level == "info" &&
				c.UpstreamDelay.D() == 250*time.Millisecond
		}},
		{"file", []string{"--config", file}, func(c *Config) bool {
			return c.Node == "filenode" && c.Root == "/fileroot" && c.Interval.D() == 24*time.Hour && c.Offset.D() == 250*time.Millisecond &&
				c.Listen == "127.0.0.1:9200" && slices.Equal(c.Plugins, []string{"load", "cpu"}) && len(c.Upstream) == 2 &&
				c.UpstreamDelay.D() == time.Second
		}},
		{"flags over file", []string{"--interval", "100ms", "--config", file, "--plugins", "memory", "--upstream", "127.0.0.1:8000",
			"--node", "flagnode", "--offset", "0s", "--key", "/k", "--upstream-delay", "0s"}, func(c *Config) bool {
			return c.Node == "flagnode" && c.Root == "/fileroot" && c.Interval.D() == 100*time.Millisecond && c.Offset == 0 &&
				c.Listen == "127.0.0.1:9200" && slices.Equal(c.Plugins, []string{"memory"}) &&
				slices.Equal(c.Upstream, []string{"127.0.0.1:8000"}) && c.Key == "/k" && c.UpstreamDelay == 0
		}},
		{"prometheus units on flags", []string{"--interval", "1w", "--upstream", "127.0.0.1:1", "--upstream", "127.0.0.1:2"}, func(c *Config) bool {
			return c.Interval.D() == 7*24*time.Hour && slices.Equal(c.Upstream, []string{"127.0.0.1:1", "127.0.0.1:2"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("%v: got %+v", tc.args, c.Sampler)
			}
		})
	}
}

// TestFlagErrorsNameFlag: the [sampler] rules apply to flags too, and the
// error names the flag.
func TestFlagErrorsNameFlag(t *testing.T) {
	for args, want := range map[string]string{
		"--interval 500us":    "--interval: must be at least 1ms, got 500µs",
		"--upstream nohost":   `--upstream: "nohost": want host:port`,
		"--plugins nosuch":    `--plugins: unknown plugin "nosuch"`,
		"--node a/b":          `--node: "a/b": want letters`,
		"--listen 9100":       `--listen: "9100": want host:port`,
		"--offset -1s":        `invalid value "-1s" for flag -offset`,
		"--log-format xml":    `--log-format "xml"`,
		"--config /nonexist":  "read config",
		"--interval 1d extra": `unexpected argument "extra"`,
		"--upstream-delay 2s": "--upstream-delay: must be between 0s and 1s, got 2s",
	} {
		_, err := parseFlags(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
	// Every error is reported, each naming its flag.
	_, err := parseFlags([]string{"--upstream", "foo", "--plugins", "nope", "--log-level", "loud"})
	for _, want := range []string{`--upstream: "foo"`, `--plugins: unknown plugin "nope"`, `--log-level "loud"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("three bad flags: err %v, want %q", err, want)
		}
	}
	if _, err := parseFlags([]string{"--listen", "none"}); err != nil {
		t.Errorf("--listen none: %v", err)
	}
}
