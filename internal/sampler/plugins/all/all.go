// Package all links every sampler plugin into the binary.
package all

import (
	_ "github.com/vigil-hpc/vigil/internal/sampler/plugins/load"
)
