package duration

import (
	"flag"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	const day = 24 * time.Hour
	good := map[string]time.Duration{
		"0": 0, "0s": 0, "100ms": 100 * time.Millisecond, "1.5s": 1500 * time.Millisecond,
		"1d": day, "1w": 7 * day, "1y": 365 * day, "15d": 15 * day, "1d12h": 36 * time.Hour,
		"2h30m": 150 * time.Minute, "1h30m15s500ms": time.Hour + 30*time.Minute + 15*time.Second + 500*time.Millisecond,
		"250us": 250 * time.Microsecond, "1m0s": time.Minute,
	}
	for s, want := range good {
		got, err := Parse(s)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1s", "-1d", "1", "15 days", "1s1d", "1d1d", "d", "1.5d", "99999999999999999999y", "300000y"} {
		if got, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, got)
		}
	}
}

func TestStringRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 1500 * time.Microsecond, time.Second, 90 * time.Second,
		36 * time.Hour, 400 * 24 * time.Hour, 3*time.Hour + 7*time.Millisecond} {
		s := Duration(d).String()
		got, err := Parse(s)
		if err != nil || got != d {
			t.Errorf("%v: String %q parses back as %v, %v", d, s, got, err)
		}
	}
	for d, want := range map[time.Duration]string{36 * time.Hour: "1d12h", 15 * 24 * time.Hour: "15d",
		14 * 24 * time.Hour: "2w", 400 * 24 * time.Hour: "400d", 365 * 24 * time.Hour: "1y", 1500 * time.Microsecond: "1.5ms"} {
		if s := Duration(d).String(); s != want {
			t.Errorf("%v writes %q, want %q", d, s, want)
		}
	}
}

func TestFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	d := Duration(time.Second)
	fs.Var(&d, "interval", "")
	if err := fs.Parse([]string{"--interval", "1d"}); err != nil || d.D() != 24*time.Hour {
		t.Fatalf("--interval 1d: %v, %v", d.D(), err)
	}
	if err := fs.Parse([]string{"--interval", "-1s"}); err == nil {
		t.Fatal("--interval -1s accepted")
	}
}
