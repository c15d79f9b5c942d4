//go:build !linux

package timex

import "github.com/vigil-hpc/vigil/internal/sampler"

type rawTimex struct{}

func adjtimex(*rawTimex, *State) error { return sampler.ErrNotAvailable }
