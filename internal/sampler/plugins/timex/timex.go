// Package timex exports the kernel clock discipline state from adjtimex(2)
// (node_exporter's timex collector): offset, frequency, errors, sync status.
package timex

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "timex",
		Description:  "clock synchronisation state from adjtimex(2)",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Timex{} },
		SampleConfig: sampleConfig,
	})
}

// State is the part of struct timex that is exported, widened to int64.
type State struct {
	Return                                 int // adjtimex's return value: the clock state
	Offset, Freq, Maxerror, Esterror       int64
	Status                                 int64
	Constant, Tick, Ppsfreq, Jitter, Shift int64
	Stabil, Jitcnt, Calcnt, Errcnt, Stbcnt int64
	Tai                                    int64
}

const (
	timeError = 5      // TIME_ERROR: the clock is not synchronised
	staNano   = 0x2000 // STA_NANO: offset and jitter are in ns, not µs
	nano      = 1e9
	micro     = 1e6
	ppm16frac = 1000000.0 * 65536.0 // freq units: ppm with a 16-bit fraction
)

// Metric indexes, in Values order.
const (
	iSync = iota
	iOffset
	iFreq
	iMaxerror
	iEsterror
	iStatus
	iConstant
	iTick
	iPpsfreq
	iJitter
	iShift
	iStabil
	iJitcnt
	iCalcnt
	iErrcnt
	iStbcnt
	iTai
	NumMetrics
)

var specs = [NumMetrics]struct {
	name, help string
	typ        metric.Type
}{
	iSync:     {"sync_status", "Is clock synchronized to a reliable server (1 = yes, 0 = no).", metric.Gauge},
	iOffset:   {"offset_seconds", "Time offset in between local system and reference clock.", metric.Gauge},
	iFreq:     {"frequency_adjustment_ratio", "Local clock frequency adjustment.", metric.Gauge},
	iMaxerror: {"maxerror_seconds", "Maximum error in seconds.", metric.Gauge},
	iEsterror: {"estimated_error_seconds", "Estimated error in seconds.", metric.Gauge},
	iStatus:   {"status", "Value of the status array bits.", metric.Gauge},
	iConstant: {"loop_time_constant", "Phase-locked loop time constant.", metric.Gauge},
	iTick:     {"tick_seconds", "Seconds between clock ticks.", metric.Gauge},
	iPpsfreq:  {"pps_frequency_hertz", "Pulse per second frequency.", metric.Gauge},
	iJitter:   {"pps_jitter_seconds", "Pulse per second jitter.", metric.Gauge},
	iShift:    {"pps_shift_seconds", "Pulse per second interval duration.", metric.Gauge},
	iStabil:   {"pps_stability_hertz", "Pulse per second stability, average of recent frequency changes.", metric.Gauge},
	iJitcnt:   {"pps_jitter_total", "Pulse per second count of jitter limit exceeded events.", metric.Counter},
	iCalcnt:   {"pps_calibration_total", "Pulse per second count of calibration intervals.", metric.Counter},
	iErrcnt:   {"pps_error_total", "Pulse per second count of calibration errors.", metric.Counter},
	iStbcnt:   {"pps_stability_exceeded_total", "Pulse per second count of stability limit exceeded events.", metric.Counter},
	iTai:      {"tai_offset_seconds", "International Atomic Time (TAI) offset.", metric.Gauge},
}

// Values converts a kernel answer to node_exporter's units.
func Values(s *State, v *[NumMetrics]float64) {
	v[iSync] = 1
	if s.Return == timeError {
		v[iSync] = 0
	}
	div := micro
	if s.Status&staNano != 0 {
		div = nano
	}
	v[iOffset] = float64(s.Offset) / div
	v[iFreq] = 1 + float64(s.Freq)/ppm16frac
	v[iMaxerror] = float64(s.Maxerror) / micro
	v[iEsterror] = float64(s.Esterror) / micro
	v[iStatus] = float64(s.Status)
	v[iConstant] = float64(s.Constant)
	v[iTick] = float64(s.Tick) / micro
	v[iPpsfreq] = float64(s.Ppsfreq) / ppm16frac
	v[iJitter] = float64(s.Jitter) / div
	v[iShift] = float64(s.Shift)
	v[iStabil] = float64(s.Stabil) / ppm16frac
	v[iJitcnt] = float64(s.Jitcnt)
	v[iCalcnt] = float64(s.Calcnt)
	v[iErrcnt] = float64(s.Errcnt)
	v[iStbcnt] = float64(s.Stbcnt)
	v[iTai] = float64(s.Tai)
}

// Timex is the timex plugin.
type Timex struct {
	descs [NumMetrics]*metric.Desc
	raw   rawTimex
	state State
	vals  [NumMetrics]float64
	// read is the kernel call; tests replace it.
	read func(*rawTimex, *State) error
}

// Init makes the descriptors. adjtimex reads the running kernel's clock,
// so the root does not apply.
func (t *Timex) Init(sampler.Env) error {
	for i, s := range specs {
		t.descs[i] = metric.NewDesc("node_timex_"+s.name, s.help, s.typ)
	}
	if t.read == nil {
		t.read = adjtimex
	}
	return nil
}

// Sample makes one read-only adjtimex call.
func (t *Timex) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if err := t.read(&t.raw, &t.state); err != nil {
		return fmt.Errorf("adjtimex: %w", err)
	}
	Values(&t.state, &t.vals)
	for i, d := range t.descs {
		b.Add(d, t.vals[i])
	}
	return nil
}
