package health

import (
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
)

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		c    CheckConfig
		want string
	}{
		{CheckConfig{Name: "a", Type: "bogus"}, `type "bogus" unknown (known: mount,`},
		{CheckConfig{Name: "", Type: "mount", Path: "/"}, "name: want 1 to 64"},
		{CheckConfig{Name: "a b", Type: "mount", Path: "/"}, "name: want 1 to 64"},
		{CheckConfig{Name: "a", Type: "mount"}, "type mount needs path"},
		{CheckConfig{Name: "a", Type: "mount", Path: "scratch"}, `path "scratch": want an absolute path`},
		{CheckConfig{Name: "a", Type: "mount", Path: "/", Process: "x"}, "process does not apply to type mount (it takes path, read_write, read_only, fs_type, source)"},
		{CheckConfig{Name: "a", Type: "mount", Path: "/", ReadWrite: true, ReadOnly: true}, "read_write and read_only exclude each other"},
		{CheckConfig{Name: "a", Type: "free_space", Path: "/"}, "type free_space needs min_free"},
		{CheckConfig{Name: "a", Type: "free_space", Path: "/", MinFree: "lots"}, `min_free: "lots": want a percentage`},
		{CheckConfig{Name: "a", Type: "free_space", Path: "/", MinFree: "120%"}, "between 0 and 100"},
		{CheckConfig{Name: "a", Type: "process", Process: "/usr/sbin/sshd"}, "want a command name, not a path"},
		{CheckConfig{Name: "a", Type: "kernel", Expected: "6.[1"}, "not a glob"},
		{CheckConfig{Name: "a", Type: "memory", Expected: "10%"}, `want a size such as "256GiB"`},
		{CheckConfig{Name: "a", Type: "cpus", Expected: "many"}, "want a CPU count"},
		{CheckConfig{Name: "a", Type: "command"}, "type command needs command"},
		{CheckConfig{Name: "a", Type: "command", Command: []string{"true"}, Path: "/x"}, "path does not apply to type command"},
		{CheckConfig{Name: "a", Type: "tcp_port", Address: "localhost"}, "want host:port"},
		{CheckConfig{Name: "a", Type: "cpus", Expected: "4", Interval: duration.Duration(time.Millisecond)}, "interval must be between 1s and 24h"},
		{CheckConfig{Name: "a", Type: "cpus", Expected: "4", Timeout: duration.Duration(2 * time.Hour)}, "timeout must be between 10ms and 1h"},
	} {
		_, err := Compile([]CheckConfig{tc.c}, time.Minute, 10*time.Second)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.c, err, tc.want)
		}
	}
	_, err := Compile([]CheckConfig{{Name: "a", Type: "cpus", Expected: "4"}, {Name: "a", Type: "cpus", Expected: "8"}}, time.Minute, time.Second)
	if err == nil || !strings.Contains(err.Error(), `check[1] "a": name used twice`) {
		t.Errorf("duplicate: err = %v", err)
	}
	cs, err := Compile([]CheckConfig{{Name: "a", Type: "cpus", Expected: "4", Interval: duration.Duration(5 * time.Second)}, {Name: "b", Type: "hostname", Expected: "x"}}, time.Minute, time.Second)
	if err != nil || len(cs) != 2 || cs[0].Interval != 5*time.Second || cs[1].Interval != time.Minute || cs[1].Timeout != time.Second {
		t.Fatalf("Compile = %+v, %v", cs, err)
	}
}

func TestParseAmount(t *testing.T) {
	for in, want := range map[string][2]float64{
		"10%": {10, 0}, " 2.5 % ": {2.5, 0}, "4096": {-1, 4096}, "1k": {-1, 1024}, "20GiB": {-1, 20 << 30},
		"20G": {-1, 20 << 30}, "512MB": {-1, 512 << 20}, "1.5T": {-1, 1.5 * (1 << 40)},
	} {
		pct, b, err := parseAmount(in)
		if err != nil || pct != want[0] || float64(b) != want[1] {
			t.Errorf("parseAmount(%q) = %v, %v, %v; want %v", in, pct, b, err, want)
		}
	}
	for _, in := range []string{"", "%", "-1%", "x", "10X", "-5G", "1e30P"} {
		if _, _, err := parseAmount(in); err == nil {
			t.Errorf("parseAmount(%q): no error", in)
		}
	}
}

func TestReason(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	for in, want := range map[string]string{
		"disk bad\nsecond line":    "disk bad",
		"  padded\t \r\nx":         "padded",
		"":                         "failed",
		"\n\nlater":                "failed",
		"bell\x07 and \xff byte":   "bell? and ? byte",
		"tab\there":                "tab here",
		long:                       strings.Repeat("é", 60),
		strings.Repeat("a", 300):   strings.Repeat("a", 120),
		"ok \u2713 unicode":        "ok \u2713 unicode",
		"escape \x1b[31mred\x1b[m": "escape ?[31mred?[m",
	} {
		got := Reason(in)
		if got != want {
			t.Errorf("Reason(%q) = %q, want %q", in, got, want)
		}
		if len(got) > MaxReason {
			t.Errorf("Reason(%q) is %d bytes", in, len(got))
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	data := []byte(`22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
41 22 0:45 / /scratch rw,relatime shared:30 master:2 - lustre 10.1.0.1@o2ib:/scratch rw,flock
42 22 0:46 / /home rw,relatime - nfs4 nfs01:/export/home ro,vers=4.2
43 22 0:47 / /mnt/a\040b\134c rw - tmpfs tmp\040fs rw
50 41 0:48 / /scratch ro,relatime - tmpfs over rw
short line
60 22 0:49 / /broken rw no-separator here at all x
`)
	for point, want := range map[string]mount{
		"/":          {point: "/", fstype: "ext4", source: "/dev/nvme0n1p2"},
		"/scratch":   {point: "/scratch", fstype: "tmpfs", source: "over", readOnly: true}, // the later mount shadows
		"/home":      {point: "/home", fstype: "nfs4", source: "nfs01:/export/home", readOnly: true},
		`/mnt/a b\c`: {point: `/mnt/a b\c`, fstype: "tmpfs", source: "tmp fs"},
	} {
		got, ok := parseMountinfo(data, point)
		if !ok || got != want {
			t.Errorf("%s: got %+v %v, want %+v", point, got, ok, want)
		}
	}
	for _, point := range []string{"/broken", "/nowhere", "/mnt/a"} {
		if m, ok := parseMountinfo(data, point); ok {
			t.Errorf("%s: found %+v", point, m)
		}
	}
}

func TestCountCPUs(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-63": 64, "0-3,8,10-11\n": 7} {
		if got, ok := countCPUs(in); !ok || got != want {
			t.Errorf("countCPUs(%q) = %d %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "a", "3-1", "0-", "-1"} {
		if n, ok := countCPUs(in); ok {
			t.Errorf("countCPUs(%q) = %d, want error", in, n)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte("43 22 0:47 / /mnt/a\\040b rw - tmpfs tmpfs rw\n"), "/mnt/a b")
	f.Fuzz(func(t *testing.T, data []byte, point string) { parseMountinfo(data, point) })
}

func FuzzReason(f *testing.F) {
	f.Add("a\xffb\nc")
	f.Fuzz(func(t *testing.T, s string) {
		if r := Reason(s); len(r) > MaxReason || strings.ContainsAny(r, "\n\r") {
			t.Fatalf("Reason(%q) = %q", s, r)
		}
	})
}
