//go:build !linux

package processes

import "github.com/vigil-hpc/vigil/internal/sampler"

type walker struct{}

func (*walker) init(string) {}

func (*walker) walk(*Counts, int) error { return sampler.ErrNotAvailable }
