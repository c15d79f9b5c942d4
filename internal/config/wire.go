package config

import (
	"errors"
	"flag"
	"strconv"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// WireLimits are a wire listener's connection caps: keys of the
// [aggregator] and [server] tables, and flags of both daemons. 0 means
// package wire's default.
type WireLimits struct {
	MaxConns               int `toml:"wire_max_conns"`
	MaxConnsPerSource      int `toml:"wire_max_conns_per_source"`
	MaxHandshakes          int `toml:"wire_max_handshakes"`
	MaxHandshakesPerSource int `toml:"wire_max_handshakes_per_source"`
}

// RegisterFlags binds the flags to w's fields, their values as defaults.
func (w *WireLimits) RegisterFlags(fs *flag.FlagSet) {
	d := func(n int) string { return " (0: " + strconv.Itoa(n) + ")" }
	fs.IntVar(&w.MaxConns, "wire-max-conns", w.MaxConns,
		"connections the wire listener takes; further ones are refused and counted"+d(wire.DefaultMaxConns))
	fs.IntVar(&w.MaxConnsPerSource, "wire-max-conns-per-source", w.MaxConnsPerSource,
		"wire connections from one source address (IPv6: its /64)"+d(wire.DefaultMaxConnsPerSource))
	fs.IntVar(&w.MaxHandshakes, "wire-max-handshakes", w.MaxHandshakes,
		"wire connections not yet authenticated"+d(wire.DefaultMaxHandshakes))
	fs.IntVar(&w.MaxHandshakesPerSource, "wire-max-handshakes-per-source", w.MaxHandshakesPerSource,
		"wire connections not yet authenticated from one source address"+d(wire.DefaultMaxHandshakesPerSource))
}

// Validate checks the caps.
func (w WireLimits) Validate() error {
	var errs []error
	for _, v := range []struct {
		key string
		n   int
	}{
		{"wire_max_conns", w.MaxConns}, {"wire_max_conns_per_source", w.MaxConnsPerSource},
		{"wire_max_handshakes", w.MaxHandshakes}, {"wire_max_handshakes_per_source", w.MaxHandshakesPerSource},
	} {
		if v.n < 0 {
			errs = append(errs, Field(v.key, "must not be negative (0: the default)"))
		}
	}
	return errors.Join(errs...)
}

// Apply sets the caps in o.
func (w WireLimits) Apply(o *wire.ServerOptions) {
	o.MaxConns, o.MaxConnsPerSource = w.MaxConns, w.MaxConnsPerSource
	o.MaxHandshakes, o.MaxHandshakesPerSource = w.MaxHandshakes, w.MaxHandshakesPerSource
}
