package jobs

import (
	"fmt"
	"os"
	"reflect"
	"testing"
)

// oldRecord is sampleJob("1234") as written before summaries kept Energy
// and Lustre (flags hasSummary|hasAppIO), made by codec.go at f452414.
const oldRecord = "testdata/record-appio.bin"

func TestCodecOldRecord(t *testing.T) {
	b, err := os.ReadFile(oldRecord)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeJob(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleJob("1234")
	want.Summary.Energy, want.Summary.Lustre = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("old record:\n got %+v\nwant %+v", got, want)
	}
}

// TestCodecEnergyBound: a summary's energy keeps at most MaxEnergyNodes
// nodes and missing names; the rest are counted as folded.
func TestCodecEnergyBound(t *testing.T) {
	j := sampleJob("5")
	e := &Energy{Joules: 1000}
	for i := range MaxEnergyNodes + 10 {
		n := fmt.Sprintf("x%03d", i)
		j.Nodes = append(j.Nodes, n)
		e.Nodes = append(e.Nodes, NodeEnergy{Node: n, Joules: 1, NodeJoules: 1, Share: 1, Source: "rapl"})
		e.Missing = append(e.Missing, n)
	}
	j.Summary.Energy = e
	got, err := decodeJob(appendJob(nil, j), nil)
	if err != nil {
		t.Fatal(err)
	}
	g := got.Summary.Energy
	if len(g.Nodes) != MaxEnergyNodes || g.Folded != 10 || len(g.Missing) != MaxEnergyNodes || g.MissingFolded != 10 || g.Joules != 1000 {
		t.Errorf("bounded energy: %d nodes, %d folded, %d missing, %d missing folded, %g J",
			len(g.Nodes), g.Folded, len(g.Missing), g.MissingFolded, g.Joules)
	}
	if !reflect.DeepEqual(g.Nodes, e.Nodes[:MaxEnergyNodes]) {
		t.Errorf("kept nodes differ")
	}
}

// FuzzDecodeJob: any bytes decode to a job or an error, never a panic,
// and a decoded job encodes to a record that decodes the same.
func FuzzDecodeJob(f *testing.F) {
	f.Add(appendJob(nil, sampleJob("1234")))
	if b, err := os.ReadFile(oldRecord); err == nil {
		f.Add(b)
	}
	f.Add([]byte{codecVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := decodeJob(b, nil)
		if err != nil {
			return
		}
		again, err := decodeJob(appendJob(nil, j), nil)
		if err != nil {
			t.Fatalf("re-encoded record: %v", err)
		}
		if !reflect.DeepEqual(appendJob(nil, again), appendJob(nil, j)) {
			t.Fatalf("re-encoding differs")
		}
	})
}
