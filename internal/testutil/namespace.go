package testutil

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// InNamespace runs the calling test in namespaces of its own. In the
// parent it runs this test binary again, for this test alone, under
// unshare(1) with args (such as "--net"), fails t unless the test passed
// there, and returns false: the caller returns. In that child, marked by
// env, it returns true and the test goes on. It needs root, and skips with
// -short.
func InNamespace(t *testing.T, env string, args ...string) bool {
	t.Helper()
	if os.Getenv(env) != "" {
		return true
	}
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a namespace of its own")
	}
	unshare := LookPeer(t, "unshare", "apt-get install util-linux")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, append(args, exe, "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.v")...)
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a namespace of its own (unshare %s):\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatal("the test did not run in the namespace")
	}
	return false
}
