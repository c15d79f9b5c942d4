package wire

import (
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Discard is a Handler that drops everything it is given; the server still
// acknowledges what it decoded. Benchmarks use it as a cost-free upstream.
type Discard struct{}

func (Discard) Connect(Peer)                                      {}
func (Discard) Disconnect(Peer, error)                            {}
func (Discard) Schema(string, []*metric.Desc)                     {}
func (Discard) Tick(string, time.Time, []*metric.Desc, []float64) {}
func (Discard) Gap(string, time.Time, time.Time)                  {}
func (Discard) NodeState(string, bool, time.Time)                 {}
