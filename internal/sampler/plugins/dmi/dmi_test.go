package dmi_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: a server board with every file (one empty, chassis_type and
// modalias not labels). No DMI on the development VM: fixture-only.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "dmi", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "dmi", "testdata/basic", nil) }

func TestNoDMI(t *testing.T) { testutil.InitNotAvailable(t, "dmi") }
