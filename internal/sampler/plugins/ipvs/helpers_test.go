package ipvs_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func testdataFile(dir, rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join("testdata", dir, filepath.FromSlash(rel)))
	return string(b), err
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ipString(a [16]byte) string { return net.IP(a[:]).String() }
