package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
		check   func(string) bool
	}{
		{args: nil, check: func(s string) bool { return strings.Contains(s, "level=INFO msg=hello") }},
		{args: []string{"--log-format", "json"}, check: func(s string) bool {
			var m map[string]any
			return json.Unmarshal([]byte(s), &m) == nil && m["msg"] == "hello"
		}},
		{args: []string{"--log-level", "warn"}, check: func(s string) bool { return s == "" }},
		{args: []string{"--log-level", "loud"}, wantErr: `--log-level "loud"`},
		{args: []string{"--log-format", "xml"}, wantErr: `--log-format "xml"`},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o Options
		o.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log, err := New(&buf, o)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		log.Info("hello")
		if !tc.check(strings.TrimSpace(buf.String())) {
			t.Errorf("%v: logged %q", tc.args, buf.String())
		}
	}
}

func TestOnChange(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var o OnChange
	for _, err := range []error{errors.New("disk full"), errors.New("disk full"), nil, errors.New("disk full"), errors.New("read-only")} {
		o.Warn(log, "store", err)
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 3 {
		t.Fatalf("%d warnings, want 3 (a repeat is quiet, a recovery re-arms, a new kind is told):\n%s", n, buf.String())
	}
}
