package grafanacheck

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Env is what Grafana knows when it runs a panel's queries.
type Env struct {
	From, To time.Time
	// ScrapeInterval is the data source's "scrape interval" setting
	// (Grafana's default 15s): the smallest $__interval and the base of
	// $__rate_interval.
	ScrapeInterval time.Duration
	// MaxDataPoints stands for the panel's width in pixels where the
	// panel sets no maxDataPoints (0: 1000).
	MaxDataPoints int
}

// Interval is Grafana's $__interval for a query: the range over the data
// points, rounded to a "nice" interval, not below the query's (or
// panel's, or data source's) minimum interval.
func (e Env) Interval(p Panel, t Target) (time.Duration, error) {
	points := e.MaxDataPoints
	if p.MaxDataPoints > 0 {
		points = p.MaxDataPoints
	}
	if points <= 0 {
		points = 1000
	}
	minIv := e.ScrapeInterval
	for _, s := range []string{p.Interval, t.Interval} {
		if s == "" {
			continue
		}
		d, err := parseGrafanaDuration(strings.TrimPrefix(s, ">"))
		if err != nil {
			return 0, fmt.Errorf("panel %s: interval %q: %w", p.Name(), s, err)
		}
		minIv = d
	}
	iv := roundInterval(e.To.Sub(e.From) / time.Duration(points))
	return max(iv, minIv, time.Millisecond), nil
}

// RateInterval is Grafana's $__rate_interval: four scrape intervals, or
// $__interval plus one if that is longer, so a rate always spans at least
// two samples.
func (e Env) RateInterval(iv time.Duration) time.Duration {
	return max(iv+e.ScrapeInterval, 4*e.ScrapeInterval)
}

// roundInterval rounds as Grafana's roundInterval does, for the part of
// its table a dashboard replay meets (10 ms to a day).
func roundInterval(d time.Duration) time.Duration {
	steps := []struct{ below, to time.Duration }{
		{15 * time.Millisecond, 10 * time.Millisecond}, {35 * time.Millisecond, 20 * time.Millisecond},
		{75 * time.Millisecond, 50 * time.Millisecond}, {150 * time.Millisecond, 100 * time.Millisecond},
		{350 * time.Millisecond, 200 * time.Millisecond}, {750 * time.Millisecond, 500 * time.Millisecond},
		{1500 * time.Millisecond, time.Second}, {3500 * time.Millisecond, 2 * time.Second},
		{7500 * time.Millisecond, 5 * time.Second}, {12500 * time.Millisecond, 10 * time.Second},
		{17500 * time.Millisecond, 15 * time.Second}, {25 * time.Second, 20 * time.Second},
		{45 * time.Second, 30 * time.Second}, {90 * time.Second, time.Minute},
		{210 * time.Second, 2 * time.Minute}, {450 * time.Second, 5 * time.Minute},
		{750 * time.Second, 10 * time.Minute}, {1050 * time.Second, 15 * time.Minute},
		{1500 * time.Second, 20 * time.Minute}, {2700 * time.Second, 30 * time.Minute},
		{5400 * time.Second, time.Hour}, {9000 * time.Second, 2 * time.Hour},
		{16200 * time.Second, 3 * time.Hour}, {32400 * time.Second, 6 * time.Hour},
		{86400 * time.Second, 12 * time.Hour},
	}
	if d < 10*time.Millisecond {
		return time.Millisecond
	}
	for _, s := range steps {
		if d < s.below {
			return s.to
		}
	}
	return 24 * time.Hour
}

// parseGrafanaDuration reads "15s", "1m", "500ms", "1h".
func parseGrafanaDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 {
		return 0, fmt.Errorf("want a number and a unit")
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return 0, err
	}
	unit := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[s[i:]]
	if unit == 0 {
		return 0, fmt.Errorf("unknown unit %q", s[i:])
	}
	return time.Duration(n) * unit, nil
}

// promDuration formats d as PromQL does ("4s", "1m30s" as "90s").
func promDuration(d time.Duration) string {
	if d%time.Second != 0 {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

var varRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)`)

// Expand replaces the dashboard variables in vars and Grafana's built-in
// ones ($__interval, $__interval_ms, $__rate_interval, $__range,
// $__range_s, $__range_ms) for a query whose $__interval is iv. Single
// values are inserted as they are, as Grafana does for a variable that
// is neither multi-value nor "include all". An unknown variable is an
// error: Grafana would leave it in and the query would fail to parse.
func (e Env) Expand(expr string, vars map[string]string, iv time.Duration) (string, error) {
	rng := e.To.Sub(e.From)
	builtin := map[string]string{
		"__interval":      promDuration(iv),
		"__interval_ms":   strconv.FormatInt(iv.Milliseconds(), 10),
		"__rate_interval": promDuration(e.RateInterval(iv)),
		"__range":         promDuration(rng.Round(time.Second)),
		"__range_s":       strconv.FormatInt(int64(math.Round(rng.Seconds())), 10),
		"__range_ms":      strconv.FormatInt(rng.Milliseconds(), 10),
	}
	var missing []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := builtin[name]; ok {
			return v
		}
		if v, ok := vars[name]; ok {
			return v
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return out, fmt.Errorf("unknown variables %v", missing)
	}
	return out, nil
}
