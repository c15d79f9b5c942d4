package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadTopology(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "topo")
	os.WriteFile(good, []byte("# racks\nrack01: cn[001-002] gpu1\n\nrack02: cn003 # spare\n"), 0o644)
	g, err := LoadTopology(good)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cn001": "rack01", "cn002": "rack01", "gpu1": "rack01", "cn003": "rack02"}
	if len(g) != len(want) {
		t.Fatalf("got %v", g)
	}
	for k, v := range want {
		if g[k] != v {
			t.Errorf("%s in %q, want %q", k, g[k], v)
		}
	}
	for _, tc := range []struct{ text, err string }{
		{"rack01 cn001\n", "topo:1: want"},
		{"rack01: cn[1-\n", "topo:1: host list"},
		{"a: cn1\nb: cn1\n", "topo:2: node cn1 is already in group a"},
	} {
		os.WriteFile(good, []byte(tc.text), 0o644)
		if _, err := LoadTopology(good); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: err %v, want %q", tc.text, err, tc.err)
		}
	}
}
