// Package sampler runs sampler plugins on aligned wall-clock ticks and keeps
// the latest collection of each for /metrics and for the upstream stream.
package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// Plugin collects one group of metrics.
//
// Init is called once with the plugin's decoded configuration; it validates
// and prepares. Sample is called every tick and appends into b, which the
// scheduler owns and reuses: a plugin may keep *metric.Desc pointers across
// ticks (and should, so steady-state ticks allocate nothing) but must not keep b.
type Plugin interface {
	Init(env Env) error
	Sample(ctx context.Context, now time.Time, b *metric.Batch) error
}

// Env is what a plugin gets at Init.
type Env struct {
	FS     kernfs.FS
	Logger *slog.Logger
	// Stats is the scheduler's own accounting, read by the self plugin.
	Stats *Stats
	// IORecords, when set, takes per-file I/O records (the appio plugin's)
	// up the tree; recs are the callee's only during the call, which
	// must not block.
	IORecords func(recs []appio.FileRecord)
	// IORecordsDropped, when set, counts the records IORecords took that
	// its bounded queue let go.
	IORecordsDropped func() uint64
}

// ErrNotAvailable is returned by Sample or Init when the hardware or kernel
// feature a plugin reads is absent (no InfiniBand, no Lustre): not an error
// worth counting, logged at debug.
var ErrNotAvailable = errors.New("not available on this node")

// Common holds the options every plugin accepts in its [plugins.NAME] table.
type Common struct {
	// Interval overrides the sampler-wide interval for this plugin.
	Interval Duration `toml:"interval" comment:"sampling interval for this plugin; empty = sampler default"`
	// Offset overrides the sampler-wide tick offset for this plugin.
	Offset Duration `toml:"offset" comment:"offset added to the aligned tick; empty = sampler default"`
}

// Configurable is implemented by plugin configs: it exposes the common part.
type Configurable interface {
	CommonConfig() *Common
}

// CommonConfig implements Configurable for structs embedding Common.
func (c *Common) CommonConfig() *Common { return c }

// Registration describes one plugin in the registry.
type Registration struct {
	Name        string
	Description string
	// Default says whether the plugin runs when no plugin list is given.
	Default bool
	// NewConfig returns a pointer to a config struct filled with defaults;
	// it embeds Common and may add plugin-specific fields with toml tags.
	NewConfig func() Configurable
	// New builds the plugin from its (decoded) config.
	New func(cfg Configurable) Plugin
	// SampleConfig is the commented TOML printed by --sample-config.
	SampleConfig string
	// MinInterval: unless its table sets an interval, the plugin samples
	// at the sampler's interval but not more often than this (0: no
	// bound), for plugins whose figures gain nothing at 10 Hz.
	MinInterval time.Duration
}

// Interval returns the plugin's sampling interval, given its table's
// settings and the sampler's interval.
func (r Registration) Interval(c *Common, sampler time.Duration) time.Duration {
	if c.Interval != 0 {
		return c.Interval.D()
	}
	return max(sampler, r.MinInterval)
}

// registry is filled by init functions of plugin packages and read-only afterwards.
var registry = map[string]Registration{}

// Register adds a plugin; called from the plugin package's init.
func Register(r Registration) {
	if _, dup := registry[r.Name]; dup {
		panic(fmt.Sprintf("sampler: plugin %q registered twice", r.Name))
	}
	if r.NewConfig == nil {
		r.NewConfig = func() Configurable { return &Common{} }
	}
	registry[r.Name] = r
}

// Lookup returns a registered plugin.
func Lookup(name string) (Registration, bool) {
	r, ok := registry[name]
	return r, ok
}

// Names lists registered plugins, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultNames lists the plugins that run by default, sorted.
func DefaultNames() []string {
	var names []string
	for _, n := range Names() {
		if registry[n].Default {
			names = append(names, n)
		}
	}
	return slices.Clip(names)
}
