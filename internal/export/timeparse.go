package export

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/vigil-hpc/vigil/internal/query"
)

// ParseTime reads a --from or --to value: RFC 3339, Unix seconds (with an
// optional fraction), "now", or "now" plus or minus a Prometheus duration
// ("now-1h", "now-2d12h", "now+5m"), relative to now.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "now"); ok {
		if rest == "" {
			return now, nil
		}
		sign := rest[0]
		if sign != '-' && sign != '+' {
			return time.Time{}, fmt.Errorf("time %q: want now, now-DURATION or now+DURATION", s)
		}
		d, err := model.ParseDuration(rest[1:])
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: %w", s, err)
		}
		if sign == '-' {
			return now.Add(-time.Duration(d)), nil
		}
		return now.Add(time.Duration(d)), nil
	}
	t, err := query.ParseTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want RFC 3339, Unix seconds or now-DURATION", s)
	}
	return t, nil
}
