package tapestats_test

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/tapestats"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: st0 with every counter, st1 with a few (the others read as 0,
// one in hex), and the nst0 and st0a nodes, which are not drives. No tape
// on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "tapestats", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "tapestats", "testdata/basic", nil) }

func TestNoTape(t *testing.T) { testutil.InitNotAvailable(t, "tapestats") }

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "tapestats", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

// ignored_devices drops drives by name, as node_exporter's
// --collector.tapestats.ignored-devices; with every one dropped the
// plugin is left out.
func TestIgnoredDevices(t *testing.T) {
	for _, tc := range []struct{ ignore, want string }{
		{"^$", "st0 st1"},
		{"^st0$", "st1"},
		{"1", "st0"},
	} {
		p, _ := testutil.NewPlugin(t, "tapestats", "testdata/basic", &tapestats.Config{IgnoredDevices: tc.ignore})
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var got []string
		for _, d := range b.Descs {
			if v := d.Labels[0].Value; !seen[v] {
				seen[v] = true
				got = append(got, v)
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("ignored_devices %q: drives %v, want %s", tc.ignore, got, tc.want)
		}
	}
	reg, _ := sampler.Lookup("tapestats")
	err := reg.New(&tapestats.Config{IgnoredDevices: "^st"}).Init(sampler.Env{FS: kernfs.NewFS("testdata/basic"), Logger: slog.New(slog.DiscardHandler), Stats: &sampler.Stats{}})
	if !errors.Is(err, sampler.ErrNotAvailable) {
		t.Errorf("every drive ignored: Init err = %v, want ErrNotAvailable", err)
	}
}

func TestConfigFile(t *testing.T) {
	f, err := config.Parse("vigil.toml", []byte("[plugins.tapestats]\nignored_devices = '^st1$'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Plugins["tapestats"].(*tapestats.Config); c.IgnoredDevices != "^st1$" {
		t.Errorf("decoded %+v", c)
	}
	_, err = config.Parse("vigil.toml", []byte("[plugins.tapestats]\nignored_devices = '(st'\n"))
	if err == nil || !strings.Contains(err.Error(), "plugins.tapestats: ignored_devices") {
		t.Errorf("bad regexp: err = %v", err)
	}
}
