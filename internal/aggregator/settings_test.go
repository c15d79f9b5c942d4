package aggregator

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
)

func parseFlags(args []string) (*Settings, error) {
	fs := flag.NewFlagSet("aggregator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return config.ParseFlags(fs, args, "", SettingsFromFile)
}

// TestFlagsOverFile: a flag given overrides the file, the file overrides
// the defaults, an unset flag leaves the file's value.
func TestFlagsOverFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(file, []byte(`[aggregator]
name = "fileagg"
listen = "127.0.0.1:7100"
upstream = ["127.0.0.1:7000"]
http = "none"
key = "/file/key"
interval = "1d"
children = ["a", "b"]
children_file = "/file/hosts"
buffer_bytes = 1000
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(*Settings) bool
	}{
		{"defaults", nil, func(s *Settings) bool {
			c, err := s.Config(nil)
			return err == nil && s.Interval.D() == time.Second && c.Listen == DefaultListen && c.HTTP == DefaultHTTP &&
				s.BufferBytes == 0 && s.Name == "" && s.Upstream == nil
		}},
		{"file", []string{"--config", file}, func(s *Settings) bool {
			return s.Name == "fileagg" && s.Listen == "127.0.0.1:7100" && slices.Equal(s.Upstream, []string{"127.0.0.1:7000"}) &&
				s.HTTP == "none" && s.Key == "/file/key" && s.Interval.D() == 24*time.Hour &&
				slices.Equal(s.Children, []string{"a", "b"}) && s.ChildrenFile == "/file/hosts" && s.BufferBytes == 1000
		}},
		{"flags over file", []string{"--config", file, "--name", "flagagg", "--interval", "2s", "--children", "c,d",
			"--http", "127.0.0.1:7101", "--buffer-bytes", "5", "--children-file", "/flag/hosts"}, func(s *Settings) bool {
			return s.Name == "flagagg" && s.Listen == "127.0.0.1:7100" && s.Interval.D() == 2*time.Second &&
				slices.Equal(s.Children, []string{"c", "d"}) && s.HTTP == "127.0.0.1:7101" && s.BufferBytes == 5 &&
				s.ChildrenFile == "/flag/hosts" && s.Key == "/file/key"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(s) {
				t.Errorf("%v: got %+v", tc.args, s.Aggregator)
			}
		})
	}
	s, err := parseFlags([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Config(nil); err == nil || !strings.Contains(err.Error(), "/file/key") {
		t.Errorf("a missing key file: %v, want an error naming it", err)
	}
}

// TestFlagErrorsNameFlag: the [aggregator] rules apply to flags too, and
// the error names the flag.
func TestFlagErrorsNameFlag(t *testing.T) {
	for args, want := range map[string]string{
		"--interval 0s":      "--interval: must be at least 1ms",
		"--buffer-bytes -1":  "--buffer-bytes: must not be negative",
		"--upstream 7000":    `--upstream: "7000": want host:port`,
		"--http 7071":        `--http: "7071": want host:port`,
		"--log-level loud":   `--log-level "loud"`,
		"--interval 1d2d":    `invalid value "1d2d" for flag -interval`,
		"--config /nonexist": "read config",
	} {
		_, err := parseFlags(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
}
