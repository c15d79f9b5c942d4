// Package health runs node health checks (NHC-style) on their own
// schedule, off the sampler's hot path: built-in checks written in Go and
// site commands and scripts, each with a timeout, with bounded
// concurrency. The sampler's health plugin reports the latest results.
package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Defaults of the check schedule.
const (
	DefaultInterval    = 60 * time.Second
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 2
	// MaxChecks bounds the checks of one node.
	MaxChecks = 1024
	// MaxReason is the longest failure reason kept, in bytes.
	MaxReason = 120
)

// Types lists the check types, in documentation order.
var Types = []string{"mount", "writable", "free_space", "process", "hostname", "kernel", "memory", "cpus", "command", "script", "tcp_port"}

// CheckConfig is one [[plugins.health.check]] table: a name, a type and
// the type's parameters (the others must stay unset).
type CheckConfig struct {
	Name      string            `toml:"name" comment:"check label value: letters, digits, '_', '-', '.', ':'"`
	Type      string            `toml:"type" comment:"mount, writable, free_space, process, hostname, kernel, memory, cpus, command, script, tcp_port"`
	Interval  duration.Duration `toml:"interval" comment:"run every; empty = the plugin's interval"`
	Timeout   duration.Duration `toml:"timeout" comment:"give up (kill a command's process group) after; empty = the plugin's timeout"`
	Path      string            `toml:"path" comment:"mount, writable, free_space: the directory; script: the script"`
	ReadWrite bool              `toml:"read_write" comment:"mount: must be mounted read-write"`
	ReadOnly  bool              `toml:"read_only" comment:"mount: must be mounted read-only"`
	FSType    string            `toml:"fs_type" comment:"mount: expected file system type"`
	Source    string            `toml:"source" comment:"mount: expected source (device, server:/export)"`
	MinFree   string            `toml:"min_free" comment:"free_space: \"10%\" or a size such as \"20GiB\""`
	Process   string            `toml:"process" comment:"process: the command name (comm, first 15 bytes)"`
	Expected  string            `toml:"expected" comment:"hostname: the name; kernel: a glob of the release; memory: a size; cpus: a count"`
	Tolerance string            `toml:"tolerance" comment:"memory: allowed difference, \"5%\" (default) or a size"`
	Command   []string          `toml:"command" comment:"command: argv (joined by spaces for sh -c when shell = true)"`
	Args      []string          `toml:"args" comment:"script: its arguments"`
	Shell     bool              `toml:"shell" comment:"command: run through /bin/sh -c"`
	Address   string            `toml:"address" comment:"tcp_port: host:port to connect to"`
}

// Check is a validated check, ready to run.
type Check struct {
	Name     string
	Type     string
	Interval time.Duration
	Timeout  time.Duration
	run      func(ctx context.Context, e *env) outcome
}

// outcome is what one run of a check found.
type outcome struct {
	ok       bool
	reason   string
	timedOut bool
}

func pass() outcome { return outcome{ok: true} }

func fail(format string, args ...any) outcome {
	return outcome{reason: fmt.Sprintf(format, args...)}
}

// env is what checks read from: the sampler's root for files.
type env struct {
	fs     kernfs.FS
	procs  procCache  // shared by the process checks
	mounts mountCache // shared by the mount checks
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// params lists, per type, the parameters it takes (all others must be unset).
var params = map[string][]string{
	"mount":      {"path", "read_write", "read_only", "fs_type", "source"},
	"writable":   {"path"},
	"free_space": {"path", "min_free"},
	"process":    {"process"},
	"hostname":   {"expected"},
	"kernel":     {"expected"},
	"memory":     {"expected", "tolerance"},
	"cpus":       {"expected"},
	"command":    {"command", "shell"},
	"script":     {"path", "args"},
	"tcp_port":   {"address"},
}

// set reports which parameters c sets.
func (c *CheckConfig) set() map[string]bool {
	return map[string]bool{
		"path": c.Path != "", "read_write": c.ReadWrite, "read_only": c.ReadOnly, "fs_type": c.FSType != "", "source": c.Source != "",
		"min_free": c.MinFree != "", "process": c.Process != "", "expected": c.Expected != "",
		"tolerance": c.Tolerance != "", "command": len(c.Command) > 0, "args": len(c.Args) > 0,
		"shell": c.Shell, "address": c.Address != "",
	}
}

// Compile validates the checks against the plugin-wide interval and
// timeout and returns them ready to run; errors name the check.
func Compile(cfgs []CheckConfig, interval, timeout time.Duration) ([]*Check, error) {
	if len(cfgs) > MaxChecks {
		return nil, fmt.Errorf("%d checks configured, at most %d", len(cfgs), MaxChecks)
	}
	var errs []error
	seen := map[string]bool{}
	out := make([]*Check, 0, len(cfgs))
	for i := range cfgs {
		c := &cfgs[i]
		ch, err := c.compile(interval, timeout)
		if err != nil {
			errs = append(errs, fmt.Errorf("check[%d] %q: %w", i, c.Name, err))
			continue
		}
		if seen[ch.Name] {
			errs = append(errs, fmt.Errorf("check[%d] %q: name used twice", i, c.Name))
			continue
		}
		seen[ch.Name] = true
		out = append(out, ch)
	}
	if len(errs) > 0 {
		// One line, as the config loader reports it at the table's line.
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return out, nil
}

func (c *CheckConfig) compile(interval, timeout time.Duration) (*Check, error) {
	if !nameRE.MatchString(c.Name) {
		return nil, errors.New("name: want 1 to 64 letters, digits, '_', '-', '.' or ':'")
	}
	allowed, ok := params[c.Type]
	if !ok {
		return nil, fmt.Errorf("type %q unknown (known: %s)", c.Type, strings.Join(Types, ", "))
	}
	for k, isSet := range c.set() {
		if isSet && !contains(allowed, k) {
			return nil, fmt.Errorf("%s does not apply to type %s (it takes %s)", k, c.Type, strings.Join(allowed, ", "))
		}
	}
	ch := &Check{Name: c.Name, Type: c.Type, Interval: interval, Timeout: timeout}
	if c.Interval != 0 {
		ch.Interval = c.Interval.D()
	}
	if c.Timeout != 0 {
		ch.Timeout = c.Timeout.D()
	}
	if ch.Interval < time.Second || ch.Interval > 24*time.Hour {
		return nil, fmt.Errorf("interval must be between 1s and 24h, got %v", ch.Interval)
	}
	if ch.Timeout < 10*time.Millisecond || ch.Timeout > time.Hour {
		return nil, fmt.Errorf("timeout must be between 10ms and 1h, got %v", ch.Timeout)
	}
	need := func(field, v string) error {
		if v == "" {
			return fmt.Errorf("type %s needs %s", c.Type, field)
		}
		return nil
	}
	absPath := func() error {
		if err := need("path", c.Path); err != nil {
			return err
		}
		if !path.IsAbs(c.Path) || strings.ContainsRune(c.Path, 0) {
			return fmt.Errorf("path %q: want an absolute path", c.Path)
		}
		return nil
	}
	switch c.Type {
	case "mount":
		if err := absPath(); err != nil {
			return nil, err
		}
		if c.ReadWrite && c.ReadOnly {
			return nil, errors.New("read_write and read_only exclude each other")
		}
		ch.run = mountCheck(path.Clean(c.Path), c.ReadWrite, c.ReadOnly, c.FSType, c.Source)
	case "writable":
		if err := absPath(); err != nil {
			return nil, err
		}
		ch.run = writableCheck(path.Clean(c.Path))
	case "free_space":
		if err := absPath(); err != nil {
			return nil, err
		}
		if err := need("min_free", c.MinFree); err != nil {
			return nil, err
		}
		pct, bytes, err := parseAmount(c.MinFree)
		if err != nil {
			return nil, fmt.Errorf("min_free: %w", err)
		}
		ch.run = freeSpaceCheck(path.Clean(c.Path), pct, bytes)
	case "process":
		if err := need("process", c.Process); err != nil {
			return nil, err
		}
		if strings.ContainsAny(c.Process, "/\n\x00") {
			return nil, fmt.Errorf("process %q: want a command name, not a path", c.Process)
		}
		ch.run = processCheck(c.Process)
	case "hostname":
		if err := need("expected", c.Expected); err != nil {
			return nil, err
		}
		ch.run = hostnameCheck(c.Expected)
	case "kernel":
		if err := need("expected", c.Expected); err != nil {
			return nil, err
		}
		if _, err := path.Match(c.Expected, ""); err != nil {
			return nil, fmt.Errorf("expected %q: not a glob: %w", c.Expected, err)
		}
		ch.run = kernelCheck(c.Expected)
	case "memory":
		if err := need("expected", c.Expected); err != nil {
			return nil, err
		}
		pct, want, err := parseAmount(c.Expected)
		if err != nil || pct >= 0 || want == 0 {
			return nil, fmt.Errorf("expected %q: want a size such as \"256GiB\"", c.Expected)
		}
		tolPct, tolBytes := 5.0, uint64(0)
		if c.Tolerance != "" {
			if tolPct, tolBytes, err = parseAmount(c.Tolerance); err != nil {
				return nil, fmt.Errorf("tolerance: %w", err)
			}
		}
		ch.run = memoryCheck(want, tolPct, tolBytes)
	case "cpus":
		n, err := strconv.Atoi(c.Expected)
		if err != nil || n < 1 || n > 1<<20 {
			return nil, fmt.Errorf("expected %q: want a CPU count", c.Expected)
		}
		ch.run = cpusCheck(n)
	case "command":
		if len(c.Command) == 0 || c.Command[0] == "" {
			return nil, errors.New("type command needs command = [\"program\", \"arg\", ...]")
		}
		argv := c.Command
		if c.Shell {
			argv = []string{"/bin/sh", "-c", strings.Join(c.Command, " ")}
		}
		ch.run = execCheck(argv, false, killGrace(ch.Timeout))
	case "script":
		if err := absPath(); err != nil {
			return nil, err
		}
		ch.run = execCheck(append([]string{c.Path}, c.Args...), true, killGrace(ch.Timeout))
	case "tcp_port":
		if err := need("address", c.Address); err != nil {
			return nil, err
		}
		if _, _, err := net.SplitHostPort(c.Address); err != nil {
			return nil, fmt.Errorf("address %q: want host:port", c.Address)
		}
		ch.run = tcpCheck(c.Address)
	}
	return ch, nil
}

// killGrace is how long a timed-out command's process group has between
// SIGTERM and SIGKILL.
func killGrace(timeout time.Duration) time.Duration {
	return min(2*time.Second, max(50*time.Millisecond, timeout/4))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// parseAmount reads "10%" (pct 10, bytes 0) or a size with an optional
// binary unit, "20GiB", "20G", "512M", "1T", "4096" (pct -1).
func parseAmount(s string) (pct float64, bytes uint64, err error) {
	s = strings.TrimSpace(s)
	if v, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || p < 0 || p > 100 {
			return 0, 0, fmt.Errorf("%q: want a percentage between 0 and 100", s)
		}
		return p, 0, nil
	}
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.ToLower(strings.TrimSpace(s[i:]))
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "b"), "i")
	shift := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}
	sh, ok := shift[unit]
	f, perr := strconv.ParseFloat(num, 64)
	if !ok || perr != nil || f < 0 || f*float64(uint64(1)<<sh) >= 1<<63 {
		return 0, 0, fmt.Errorf("%q: want a percentage (\"10%%\") or a size (\"20GiB\", \"512M\", bytes)", s)
	}
	return -1, uint64(f * float64(uint64(1)<<sh)), nil
}

// Reason makes a failure reason a label value: the first line, printable
// UTF-8 (anything else becomes '?'), spaces trimmed, at most MaxReason
// bytes (cut at a character boundary); "failed" when nothing is left.
func Reason(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		if r == '\t' {
			r = ' '
		}
		if r == 0xFFFD || !strconv.IsPrint(r) {
			r = '?'
		}
		if b.Len()+len(string(r)) > MaxReason {
			break
		}
		b.WriteRune(r)
	}
	if out := strings.TrimSpace(b.String()); out != "" {
		return out
	}
	return "failed"
}
