// Package duration is the one duration type of vigil.toml and the flags:
// Go durations ("1.5s", "100ms") and Prometheus ones ("15d", "1w", "1y",
// "1h30m"), never negative. It is a leaf package with no dependencies so
// the lean sampler links it without pulling in Prometheus.
package duration

import (
	"fmt"
	"strings"
	"time"
)

// Duration is a non-negative time.Duration written as a string in TOML
// and on the command line; it implements flag.Value.
type Duration time.Duration

// Prometheus units, longest first; a year is 365 days as in model.Duration.
var units = []struct {
	name string
	d    time.Duration
}{
	{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour},
	{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond},
}

// Parse reads a Go or Prometheus duration; negative ones are refused.
func Parse(s string) (time.Duration, error) {
	if d, ok := parseProm(s); ok {
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q (want e.g. \"100ms\", \"30s\", \"2h\" or \"15d\")", s)
	}
	return d, nil
}

// parseProm parses the Prometheus syntax: integers with units y, w, d, h,
// m, s, ms in that order, each at most once ("1d12h"), or "0".
func parseProm(s string) (time.Duration, bool) {
	if s == "0" {
		return 0, true
	}
	if s == "" {
		return 0, false
	}
	var total time.Duration
	next := 0 // index into units: units must come in decreasing order
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i > 18 {
			return 0, false
		}
		var n int64
		for _, c := range s[:i] {
			n = n*10 + int64(c-'0')
		}
		s = s[i:]
		j := 0
		for j < len(s) && (s[j] < '0' || s[j] > '9') {
			j++
		}
		u := s[:j]
		s = s[j:]
		found := false
		for k := next; k < len(units); k++ {
			if units[k].name == u {
				if n > int64(1<<63-1)/int64(units[k].d) {
					return 0, false
				}
				add := time.Duration(n) * units[k].d
				if total > 1<<63-1-add {
					return 0, false
				}
				total += add
				next, found = k+1, true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return total, true
}

// UnmarshalText parses a Go or Prometheus duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String writes whole milliseconds in Prometheus units as
// model.Duration does ("15d", "1w", "1h30m", "0s") and anything finer as Go does ("1.5ms"); Parse reads both back.
func (d Duration) String() string {
	v := time.Duration(d)
	if v == 0 {
		return "0s"
	}
	if v < 0 || v%time.Millisecond != 0 {
		return v.String()
	}
	var sb strings.Builder
	for i, u := range units {
		// Years and weeks only when exact, as Prometheus writes them:
		// "90d" reads better than "12w6d".
		if i < 2 && v%u.d != 0 {
			continue
		}
		if n := v / u.d; n > 0 {
			fmt.Fprintf(&sb, "%d%s", n, u.name)
			v -= n * u.d
		}
	}
	return sb.String()
}

// Set parses a flag value.
func (d *Duration) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
