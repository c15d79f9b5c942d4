package query

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// Bounds used when a request gives no start or end: the widest range the
// millisecond timestamps of the TSDB can express.
var (
	minTime = time.UnixMilli(math.MinInt64 / 2).UTC()
	maxTime = time.UnixMilli(math.MaxInt64 / 2).UTC()
)

// The strings the Prometheus Go client sends for "no bound"; they have
// years beyond what time.Parse accepts.
var (
	minTimeText = minTime.Format(time.RFC3339Nano)
	maxTimeText = maxTime.Format(time.RFC3339Nano)
)

// maxUnixSeconds keeps float timestamps within what int64 milliseconds hold.
const maxUnixSeconds = 9e15

// ParseTime accepts what the Prometheus API accepts: Unix seconds with an
// optional fraction (rounded to milliseconds) or RFC 3339.
func ParseTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.Abs(f) > maxUnixSeconds {
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
		}
		sec, frac := math.Modf(f)
		ms := math.Round(frac * 1000)
		return time.Unix(int64(sec), int64(ms)*int64(time.Millisecond)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	switch s {
	case minTimeText, "-292273086-05-16T16:47:06Z":
		return minTime, nil
	case maxTimeText, "292277025-08-18T07:12:54.999999999Z":
		return maxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// ParseDuration accepts seconds as a float or a Prometheus duration (5m).
func ParseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		d := f * float64(time.Second)
		if math.IsNaN(d) || d >= math.MaxInt64 || d <= math.MinInt64 {
			return 0, fmt.Errorf("cannot parse %q to a valid duration: it overflows int64", s)
		}
		return time.Duration(d), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

// timeParam parses form value name, or returns def when it is absent.
func timeParam(get func(string) string, name string, def time.Time) (time.Time, error) {
	v := get(name)
	if v == "" {
		return def, nil
	}
	t, err := ParseTime(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid parameter %q: %w", name, err)
	}
	return t, nil
}
