package diskstats

import "github.com/vigil-hpc/vigil/internal/sampler"

// CachedDevices reports the size of the per-device cache.
func CachedDevices(p sampler.Plugin) int { return len(p.(*Diskstats).devices) }
