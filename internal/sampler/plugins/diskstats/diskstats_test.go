package diskstats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/diskstats"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "diskstats", nil) }

func newConfig(include, exclude string) *diskstats.Config {
	reg, _ := sampler.Lookup("diskstats")
	c := reg.NewConfig().(*diskstats.Config)
	c.DeviceInclude, c.DeviceExclude = include, exclude
	return c
}

// devicesOf samples root once and counts series per device.
func devicesOf(t *testing.T, root string, cfg *diskstats.Config) map[string]int {
	t.Helper()
	p, _ := testutil.NewPlugin(t, "diskstats", root, cfg)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b); err != nil {
		t.Fatal(err)
	}
	devs := map[string]int{}
	for _, s := range b.Samples() {
		devs[s.Desc.Labels[0].Value]++
	}
	return devs
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		want             map[string]int
	}{
		// Default: partitions, ram and loop devices and old 4-counter lines go.
		{exclude: diskstats.DefaultExclude, want: map[string]int{"sda": 17, "nvme0n1": 15, "dm-0": 11, "vda": 17, "xvda": 17}},
		{include: "^(sd|nvme)", exclude: diskstats.DefaultExclude, want: map[string]int{"sda": 17, "nvme0n1": 15}},
		{include: "^(ram|loop)", want: map[string]int{"ram0": 17, "loop0": 17}},
		{want: map[string]int{"loop0": 17, "sda": 17, "sda1": 17, "nvme0n1": 15, "nvme0n1p1": 15, "dm-0": 11, "ram0": 17, "vda": 17, "xvda": 17}},
	} {
		got := devicesOf(t, "testdata/basic", newConfig(tc.include, tc.exclude))
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("include %q exclude %q: series per device = %v, want %v", tc.include, tc.exclude, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		max              int
		wantErr          string
	}{
		{exclude: diskstats.DefaultExclude, max: 1},
		{include: "(sd", max: 1, wantErr: "device_include"},
		{exclude: "[", max: 1, wantErr: "device_exclude"},
		{max: 0, wantErr: "max_devices"},
	} {
		c := &diskstats.Config{DeviceInclude: tc.include, DeviceExclude: tc.exclude, MaxDevices: tc.max}
		err := c.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", *c, err, tc.wantErr)
		}
	}
}

func TestSampleErrors(t *testing.T) {
	for _, tc := range []struct{ root, want string }{
		{"testdata/garbage", `testdata/garbage/proc/diskstats: unexpected /proc/diskstats format: line 2 ("sdb"): counter 10 "x"`},
		{"testdata/missing", "no such file"},
	} {
		p, _ := testutil.NewPlugin(t, "diskstats", tc.root, nil)
		var b metric.Batch
		err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.root, err, tc.want)
		}
	}
}

func TestDeviceChurn(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "proc", "diskstats")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := newConfig("", diskstats.DefaultExclude)
	cfg.MaxDevices = 4
	p, _ := testutil.NewPlugin(t, "diskstats", root, cfg)
	var b metric.Batch
	now := time.Unix(1700000000, 0)
	for i := range 300 {
		content := fmt.Sprintf("8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n7 %d loop%d 1 2 3 4 5 6 7 8 9 10 11\n253 %d dm-%d 1 2 3 4 5 6 7 8 9 10 11\n", i, i, i, i)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		b.Reset(now)
		if err := p.Sample(context.Background(), now, &b); err != nil {
			t.Fatal(err)
		}
		if b.Len() != 22 {
			t.Fatalf("tick %d: %d samples, want 22 (sda and dm-%d)", i, b.Len(), i)
		}
		if n := diskstats.CachedDevices(p); n > cfg.MaxDevices {
			t.Fatalf("tick %d: %d cached devices, bound is %d", i, n, cfg.MaxDevices)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // "dev=v0,...;" with the counters passed to fn
		wantErr  string
	}{
		{name: "empty"},
		{name: "kernel 4.18 (15 counters)", in: " 259 0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n",
			want: "nvme0n1=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15;"},
		{name: "kernel 2.6 (11 counters) without final newline", in: "8 0 sda 1 2 3 4 5 6 7 8 9 10 11",
			want: "sda=1,2,3,4,5,6,7,8,9,10,11;"},
		{name: "kernel 5.5 (17 counters)", in: "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n",
			want: "sda=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17;"},
		{name: "extra counters ignored", in: "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19\n",
			want: "sda=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17;"},
		{name: "old partition line skipped", in: "3 1 hda1 35486 2970 13 13\n8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n",
			want: "sda=1,2,3,4,5,6,7,8,9,10,11;"},
		{name: "blank lines and tabs", in: "\n\t8\t0\tsda 1 2 3 4 5 6 7 8 9 10 11\n\n",
			want: "sda=1,2,3,4,5,6,7,8,9,10,11;"},
		{name: "no name", in: "8 0\n", wantErr: "line 1: want"},
		{name: "bad major", in: "x 0 sda 1 2 3 4 5 6 7 8 9 10 11\n", wantErr: `device number "x"`},
		{name: "bad minor", in: "8 -1 sda 1 2 3 4 5 6 7 8 9 10 11\n", wantErr: `device number "-1"`},
		{name: "bad counter", in: "8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n8 0 sdb 1 2 3 4 5 6 7 8 9 10 1.5\n", wantErr: `line 2 ("sdb"): counter 11 "1.5"`},
		{name: "counter overflow", in: "8 0 sda 18446744073709551616 2 3 4 5 6 7 8 9 10 11\n", wantErr: "counter 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			err := diskstats.Parse([]byte(tc.in), func(name []byte, v [diskstats.NumStats]uint64, n int) {
				sb.Write(name)
				sb.WriteByte('=')
				for i := range n {
					if i > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprint(&sb, v[i])
				}
				sb.WriteByte(';')
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, diskstats.ErrFormat) {
					t.Fatalf("err = %v, want ErrFormat containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sb.String() != tc.want {
				t.Errorf("got %q, want %q", sb.String(), tc.want)
			}
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "diskstats", "testdata/basic", nil)
}

func BenchmarkSample(b *testing.B) {
	for _, n := range []int{4, 64, 512} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			root := b.TempDir()
			var sb strings.Builder
			for i := range n {
				// Half whole disks, half partitions (excluded by default).
				fmt.Fprintf(&sb, "8 %d sd%c%s 219315 71932 14553838 114508 455208 473034 30398560 829396 0 405392 1000904 0 0 0 0 21234 56998\n",
					i, 'a'+byte(i/2%26), map[bool]string{true: "", false: "1"}[i%2 == 0])
			}
			path := filepath.Join(root, "proc", "diskstats")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			p, _ := testutil.NewPlugin(b, "diskstats", root, newConfig("", ""))
			testutil.BenchTicks(b, p)
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("8 0 sda 219315 71932 14553838 114508 455208 473034 30398560 829396 0 405392 1000904 0 0 0 0 21234 56998\n"))
	f.Add([]byte("3 1 hda1 35486 2970 13 13\n259 0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"))
	f.Add([]byte("8 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := diskstats.Parse(data, func(name []byte, v [diskstats.NumStats]uint64, n int) {
			if len(name) == 0 || n < diskstats.MinStats || n > diskstats.NumStats {
				t.Fatalf("bad callback: name %q n %d", name, n)
			}
		})
		if err != nil && !errors.Is(err, diskstats.ErrFormat) {
			t.Fatalf("error %v does not wrap ErrFormat", err)
		}
	})
}

func TestConfigFile(t *testing.T) {
	f, err := config.Parse("vigil.toml", []byte("[plugins.diskstats]\ndevice_include = '^nvme'\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Plugins["diskstats"].(*diskstats.Config)
	if c.DeviceInclude != "^nvme" || c.DeviceExclude != diskstats.DefaultExclude {
		t.Errorf("decoded %+v", c)
	}
	_, err = config.Parse("vigil.toml", []byte("[plugins.diskstats]\ndevice_exclude = '(sd'\n"))
	if err == nil || !strings.Contains(err.Error(), "plugins.diskstats: device_exclude") {
		t.Errorf("bad regexp: err = %v", err)
	}
}
