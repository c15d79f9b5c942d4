//go:build race

package sampler

// raceEnabled: allocation counts are not meaningful under -race
// (internal/testutil has the same, but imports this package).
const raceEnabled = true
