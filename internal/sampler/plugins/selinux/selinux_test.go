package selinux_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/selinux"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixtures: enforcing now but configured permissive (the mode switched at
// run time); permissive now, configured enforcing (quoted); off (no
// selinuxfs). The development VM has no SELinux (the off case).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "selinux", nil) }

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "selinux", "testdata/off", nil)
	testutil.ZeroAllocs(t, "selinux", "testdata/enforcing", nil)
}

func TestConfigMode(t *testing.T) {
	for in, want := range map[string]float64{
		"SELINUX=enforcing\n": 1, "SELINUX = permissive\n": 0, "SELINUX=disabled\n": -1, "": -1,
		"#SELINUX=enforcing\n": -1, "SELINUXTYPE=targeted\nSELINUX='x'\n": -1,
	} {
		if got := selinux.ConfigMode([]byte(in)); got != want {
			t.Errorf("ConfigMode(%q) = %v, want %v", in, got, want)
		}
	}
}
