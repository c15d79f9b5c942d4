package netdev

import "github.com/vigil-hpc/vigil/internal/sampler"

// CachedDevices reports the size of the per-interface cache.
func CachedDevices(p sampler.Plugin) int { return len(p.(*Netdev).devices) }

// UsesNetlink reports whether the plugin reads netlink.
func UsesNetlink(p sampler.Plugin) bool { return p.(*Netdev).useNetlink }

// Resync makes the next tick dump the links again.
func Resync(p sampler.Plugin) { p.(*Netdev).resync = true }
