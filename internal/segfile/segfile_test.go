package segfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestNumbered(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"10.seg", "9.seg", "0000000000000002.seg", "x.seg", "3.seg.tmp", "4.iorec"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "5.seg"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := Numbered(dir, ".seg", 10)
	if err != nil || !slices.Equal(got, []uint64{2, 9, 10}) {
		t.Errorf("decimal: %v, %v; want [2 9 10]", got, err)
	}
	if got, _ := Numbered(dir, ".seg", 16); !slices.Equal(got, []uint64{2, 9, 16}) {
		t.Errorf("hex: %v; want [2 9 16]", got)
	}
	if _, err := Numbered(filepath.Join(dir, "missing"), ".seg", 10); err == nil {
		t.Error("a missing directory gave no error")
	}
}
