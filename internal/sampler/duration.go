package sampler

import "github.com/vigil-hpc/vigil/internal/duration"

// Duration is the one duration type of vigil.toml (Go or Prometheus
// syntax: "100ms", "1d"); the alias keeps plugin configs unchanged.
type Duration = duration.Duration
