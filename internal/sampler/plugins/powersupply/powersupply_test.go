package powersupply_test

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

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/powersupply"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: an AC adapter and a laptop battery (µV, µW, µWh, tenths of a
// degree, a hex value, an empty string attribute). No power supply on the
// development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "powersupplyclass", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "powersupplyclass", "testdata/basic", nil) }

func TestNoPowerSupply(t *testing.T) { testutil.InitNotAvailable(t, "powersupplyclass") }

func TestInterval(t *testing.T) {
	testutil.DefaultInterval(t, "powersupplyclass", powersupply.DefaultInterval)
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "powersupplyclass", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

// ignored_supplies drops supplies by name, as node_exporter's
// --collector.powersupply.ignored-supplies; with every one dropped the
// plugin is left out.
func TestIgnoredSupplies(t *testing.T) {
	for _, tc := range []struct{ ignore, want string }{
		{"^$", "AC BAT0"},
		{"^BAT", "AC"},
		{"^A", "BAT0"},
	} {
		p, _ := testutil.NewPlugin(t, "powersupplyclass", "testdata/basic", &powersupply.Config{IgnoredSupplies: tc.ignore})
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var got []string
		for _, d := range b.Descs {
			for _, l := range d.Labels {
				if l.Name == "power_supply" && !seen[l.Value] {
					seen[l.Value] = true
					got = append(got, l.Value)
				}
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("ignored_supplies %q: supplies %v, want %s", tc.ignore, got, tc.want)
		}
	}
	reg, _ := sampler.Lookup("powersupplyclass")
	all := reg.New(&powersupply.Config{IgnoredSupplies: "."})
	err := all.Init(sampler.Env{FS: kernfs.NewFS("testdata/basic"), Logger: slog.New(slog.DiscardHandler), Stats: &sampler.Stats{}})
	if !errors.Is(err, sampler.ErrNotAvailable) {
		t.Errorf("every supply ignored: Init err = %v, want ErrNotAvailable", err)
	}
}

func TestConfigFile(t *testing.T) {
	f, err := config.Parse("vigil.toml", []byte("[plugins.powersupplyclass]\nignored_supplies = '^hidpp_battery'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Plugins["powersupplyclass"].(*powersupply.Config); c.IgnoredSupplies != "^hidpp_battery" || time.Duration(c.Interval) != powersupply.DefaultInterval {
		t.Errorf("decoded %+v", c)
	}
	_, err = config.Parse("vigil.toml", []byte("[plugins.powersupplyclass]\nignored_supplies = '(BAT'\n"))
	if err == nil || !strings.Contains(err.Error(), "plugins.powersupplyclass: ignored_supplies") {
		t.Errorf("bad regexp: err = %v", err)
	}
}
