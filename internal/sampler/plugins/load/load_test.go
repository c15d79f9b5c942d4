package load_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/load"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "load", nil) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    [3]float64
		wantErr bool
	}{
		{in: "0.52 0.41 0.30 2/834 12345\n", want: [3]float64{0.52, 0.41, 0.30}},
		{in: "12.00 7.5 0 1/1 1", want: [3]float64{12, 7.5, 0}},
		{in: "0.52 0.41\n", wantErr: true},
		{in: "", wantErr: true},
		{in: "0.52 x 0.30 2/834 1\n", wantErr: true},
	} {
		var got [3]float64
		err := load.Parse([]byte(tc.in), &got)
		if (err != nil) != tc.wantErr {
			t.Errorf("Parse(%q) err = %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && got != tc.want {
			t.Errorf("Parse(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "load", "testdata/basic", nil)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("0.52 0.41 0.30 2/834 12345\n"))
	f.Add([]byte("1 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v [3]float64
		_ = load.Parse(data, &v)
	})
}
