package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	_ "github.com/vigil-hpc/vigil/internal/sampler/plugins/all"
)

func TestGood(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.good.toml")
	if len(files) == 0 {
		t.Fatal("no good fixtures")
	}
	for _, f := range files {
		if _, err := config.Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	c, err := config.Load("testdata/full.good.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Sampler.Node != "cn0001" || c.Sampler.Offset.D() != 250*time.Millisecond || len(c.Sampler.Upstream) != 2 {
		t.Errorf("decoded %+v", c.Sampler)
	}
	if iv := c.Plugins["load"].CommonConfig().Interval.D(); iv != 100*time.Millisecond {
		t.Errorf("plugins.load.interval = %v, want 100ms", iv)
	}
	if !c.PluginSet("load") {
		t.Error("PluginSet(load) = false")
	}
}

// Each bad file must fail with file:line and a message naming the problem.
func TestBad(t *testing.T) {
	want := map[string]string{
		"unknown_key.bad.toml":        `unknown_key.bad.toml:3:1: unknown key "sampler.intervall"`,
		"unknown_plugin_key.bad.toml": `unknown_plugin_key.bad.toml:4:1: unknown key "plugins.load.colour"`,
		"bad_duration.bad.toml":       `bad_duration.bad.toml:2:`,
		"unknown_plugin.bad.toml":     `unknown_plugin.bad.toml:2: sampler.plugins: unknown plugin "nosuch"`,
		"bad_listen.bad.toml":         `bad_listen.bad.toml:2: sampler.listen: "9100"`,
		"syntax.bad.toml":             `syntax.bad.toml:1:`,
		"wrong_type.bad.toml":         `wrong_type.bad.toml:2:`,
		"tiny_interval.bad.toml":      `tiny_interval.bad.toml:2: sampler.interval: must be at least 1ms`,
	}
	files, _ := filepath.Glob("testdata/*.bad.toml")
	if len(files) != len(want) {
		t.Errorf("%d bad fixtures, %d expectations", len(files), len(want))
	}
	for _, f := range files {
		_, err := config.Load(f)
		if err == nil {
			t.Errorf("%s: no error", f)
			continue
		}
		w, ok := want[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: no expectation", f)
			continue
		}
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s:\n got: %v\nwant substring: %s", f, err, w)
		}
	}
}

func TestDefaults(t *testing.T) {
	d := config.Defaults()
	if d.Sampler.Interval.D() != time.Second {
		t.Errorf("default interval %v", d.Sampler.Interval.D())
	}
	if _, ok := d.Plugins["load"]; !ok {
		t.Error("defaults lack plugin load")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("[sampler]\ninterval = \"1s\"\n"))
	f.Add([]byte("[plugins.load]\ninterval = \"100ms\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = config.Parse("fuzz.toml", data)
	})
}
