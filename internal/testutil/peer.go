package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireE2EEnv names the variable that turns a missing real peer (a Debian
// binary an end-to-end test talks to) from a skip into a failure. CI sets it,
// so a green CI means every peer really ran.
const RequireE2EEnv = "VIGIL_REQUIRE_E2E"

// MissingPeer skips t, or fails it when VIGIL_REQUIRE_E2E=1.
func MissingPeer(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(RequireE2EEnv) == "1" {
		t.Fatalf("%s (%s=1: a missing peer is a failure)", msg, RequireE2EEnv)
	}
	t.Skip(msg)
}

// LookPeer returns the path of the peer program name, or calls MissingPeer
// with the hint that says how to install it.
func LookPeer(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		MissingPeer(t, "%s not installed (%s)", name, hint)
	}
	return p
}
