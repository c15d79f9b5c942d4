package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/internal/config"
)

// TestHealthImportNHC: the converted nhc.conf is a valid vigil.toml.
func TestHealthImportNHC(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nhc.conf")
	conf := "* || check_fs_mount_rw -f /scratch\n* || check_ps_service -S sshd\n* || check_hw_mcelog\n"
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"health", "import-nhc", p}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	f, err := config.Parse("converted.toml", out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !f.PluginSet("health") || !strings.Contains(out.String(), "# line 3: * || check_hw_mcelog") {
		t.Fatalf("output:\n%s", out.String())
	}
	if code := Main(context.Background(), []string{"health", "import-nhc"}, &out, &errb); code != 2 {
		t.Fatalf("no file: exit %d", code)
	}
}
