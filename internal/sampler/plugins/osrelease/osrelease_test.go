package osrelease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/osrelease"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "os", nil) }

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "os", "testdata/basic", nil)
	testutil.ZeroAllocs(t, "os", "testdata/usrlib", nil)
}

// TestUpgrade: a rewritten os-release shows within 64 ticks.
func TestUpgrade(t *testing.T) {
	f := testutil.NewFileFixture(t, "os", "etc/os-release", "ID=debian\nVERSION_ID=\"12\"\n", nil)
	get := func() string {
		var b metric.Batch
		for i := 0; i < 64; i++ { // the file is re-read every 64 ticks
			b.Reset(time.Now())
			if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil {
				t.Fatal(err)
			}
		}
		return string(testutil.Render(t, &b))
	}
	if got := get(); !strings.Contains(got, `node_os_version{node="test",id="debian",id_like="",name=""} 12`) {
		t.Fatalf("got %s", got)
	}
	f.Write("ID=debian\nVERSION_ID=\"13\"\n")
	if got := get(); !strings.Contains(got, `version_id="13"`) || !strings.Contains(got, "} 13\n") {
		t.Fatalf("after upgrade: %s", got)
	}
	f.Write("ID=arch\n") // rolling release: no version, so no node_os_version
	if got := get(); strings.Contains(got, "node_os_version") {
		t.Fatalf("no VERSION_ID still gave a version: %s", got)
	}
}

func TestParse(t *testing.T) {
	var v [len(osrelease.Keys)][]byte
	osrelease.Parse([]byte("# c\nNAME=\"A \\\"B\\\"\"\nID='x y'\nexport VERSION_ID=1.2.3 # note\nbogus\nID_LIKE=\n"), &v)
	for i, want := range map[int]string{5: `A "B"`, 1: "x y", 11: "1.2.3", 2: ""} {
		if string(v[i]) != want {
			t.Errorf("%s = %q, want %q", osrelease.Keys[i], v[i], want)
		}
	}
}

func TestMajorMinor(t *testing.T) {
	for in, want := range map[string]float64{"12": 12, "9.4": 9.4, "22.04": 22.04, "1.2.3": 1.2, "": 0, "rolling": 0, "7.": 7} {
		if got := osrelease.MajorMinor([]byte(in)); got != want {
			t.Errorf("MajorMinor(%q) = %v, want %v", in, got, want)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "os", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("NAME=\"Debian\"\nVERSION_ID='12'\n"))
	f.Add([]byte("A=\"\\"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v [len(osrelease.Keys)][]byte
		osrelease.Parse(data, &v)
		_ = osrelease.MajorMinor(v[11])
	})
}
