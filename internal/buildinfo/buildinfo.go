// Package buildinfo carries the version stamped in by the linker.
package buildinfo

import "runtime"

// Set with -ldflags "-X github.com/vigil-hpc/vigil/internal/buildinfo.Version=...".
var (
	Version  = "0.1.0-dev"
	Revision = "unknown"
)

// String is the one-line version text.
func String() string {
	return "vigil " + Version + " (revision " + Revision + ", " + runtime.Version() + ")"
}
