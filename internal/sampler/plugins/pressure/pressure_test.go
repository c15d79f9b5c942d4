package pressure_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/pressure"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "pressure", nil) }

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "pressure", "testdata/basic", nil)
	testutil.ZeroAllocs(t, "pressure", "testdata/noirq", nil) // a missing irq file costs nothing per tick
}

// TestNoPSI: a kernel without /proc/pressure is "not available", not an error.
func TestNoPSI(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "pressure", t.TempDir(), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

// TestBadFile: a corrupt file is an error naming it; the others still report.
func TestBadFile(t *testing.T) {
	f := testutil.NewFileFixture(t, "pressure", "proc/pressure/io", "some avg10=0 total=x\n", nil)
	var b metric.Batch
	if err := f.P.Sample(context.Background(), time.Now(), &b); err == nil {
		t.Fatal("corrupt io file: no error")
	}
	f.Write("some avg10=0.00 total=2000000\nfull avg10=0.00 total=500000\n")
	b.Reset(time.Now())
	if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Samples()) != 2 || b.Samples()[0].Value != 2 || b.Samples()[1].Value != 0.5 {
		t.Fatalf("samples %+v", b.Samples())
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in         string
		some, full int64
		bad        bool
	}{
		{in: "some avg10=0.00 avg60=0.00 avg300=0.00 total=12\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n", some: 12, full: 3},
		{in: "full avg10=0.00 total=7\n", some: -1, full: 7},
		{in: "", some: -1, full: -1},
		{in: "some avg10=1\n", bad: true},
		{in: "partial total=1\n", bad: true},
		{in: "some total=-1\n", bad: true},
	} {
		some, full, err := pressure.Parse([]byte(tc.in))
		if (err != nil) != tc.bad || !tc.bad && (some != tc.some || full != tc.full) {
			t.Errorf("Parse(%q) = %d, %d, %v", tc.in, some, full, err)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "pressure", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=12\nfull total=3\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _, _ = pressure.Parse(data) })
}
