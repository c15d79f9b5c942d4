//go:build !race

package testutil

// RaceEnabled reports whether the race detector is on (allocation counts
// are meaningless under it).
const RaceEnabled = false
