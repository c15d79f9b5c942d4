package ibnet

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the helper compiled by helperBinary.
func TestMain(m *testing.M) {
	code := m.Run()
	if helperPath != "" {
		os.RemoveAll(filepath.Dir(helperPath))
	}
	os.Exit(code)
}
