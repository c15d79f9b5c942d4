// Package powersupply samples /sys/class/power_supply (node_exporter's
// powersupplyclass collector): AC adapters, batteries, UPS and PSU drivers.
package powersupply

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval is longer than the sampler's: battery attributes are
// read through ACPI firmware methods, slow and disturbing at 1 s.
const DefaultInterval = 10 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "powersupplyclass",
		Description: "power supplies and batteries from /sys/class/power_supply",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &Config{Common: sampler.Common{Interval: sampler.Duration(DefaultInterval)}, IgnoredSupplies: "^$"}
		},
		New:          func(c sampler.Configurable) sampler.Plugin { return &PowerSupply{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.powersupplyclass] table.
type Config struct {
	sampler.Common
	// IgnoredSupplies drops supplies whose name matches (node_exporter's
	// --collector.powersupply.ignored-supplies).
	IgnoredSupplies string `toml:"ignored_supplies"`
}

// Validate compiles the expression.
func (c *Config) Validate() error {
	if _, err := regexp.Compile(c.IgnoredSupplies); err != nil {
		return fmt.Errorf("ignored_supplies: %w", err)
	}
	return nil
}

// numeric maps attribute files to metric names (after node_power_supply_)
// and the divisor node_exporter applies: µA, µV, µWh, µAh and µW by 10⁶,
// tenths of a degree by 10.
var numeric = [...]struct {
	file, metric string
	div          float64
}{
	{"authentic", "authentic", 1}, {"calibrate", "calibrate", 1}, {"capacity", "capacity", 1},
	{"capacity_alert_max", "capacity_alert_max", 1}, {"capacity_alert_min", "capacity_alert_min", 1},
	{"cycle_count", "cyclecount", 1}, {"online", "online", 1}, {"present", "present", 1},
	{"time_to_empty_now", "time_to_empty_seconds", 1}, {"time_to_full_now", "time_to_full_seconds", 1},
	{"current_boot", "current_boot", 1e6}, {"current_max", "current_max", 1e6}, {"current_now", "current_ampere", 1e6},
	{"energy_empty", "energy_empty", 1e6}, {"energy_empty_design", "energy_empty_design", 1e6},
	{"energy_full", "energy_full", 1e6}, {"energy_full_design", "energy_full_design", 1e6},
	{"energy_now", "energy_watthour", 1e6}, {"voltage_boot", "voltage_boot", 1e6}, {"voltage_max", "voltage_max", 1e6},
	{"voltage_max_design", "voltage_max_design", 1e6}, {"voltage_min", "voltage_min", 1e6},
	{"voltage_min_design", "voltage_min_design", 1e6}, {"voltage_now", "voltage_volt", 1e6},
	{"voltage_ocv", "voltage_ocv", 1e6}, {"charge_control_limit", "charge_control_limit", 1e6},
	{"charge_control_limit_max", "charge_control_limit_max", 1e6}, {"charge_counter", "charge_counter", 1e6},
	{"charge_empty", "charge_empty", 1e6}, {"charge_empty_design", "charge_empty_design", 1e6},
	{"charge_full", "charge_full", 1e6}, {"charge_full_design", "charge_full_design", 1e6},
	{"charge_now", "charge_ampere", 1e6}, {"charge_term_current", "charge_term_current", 1e6},
	{"constant_charge_current", "constant_charge_current", 1e6},
	{"constant_charge_current_max", "constant_charge_current_max", 1e6},
	{"constant_charge_voltage", "constant_charge_voltage", 1e6},
	{"constant_charge_voltage_max", "constant_charge_voltage_max", 1e6},
	{"precharge_current", "precharge_current", 1e6}, {"input_current_limit", "input_current_limit", 1e6},
	{"power_now", "power_watt", 1e6},
	{"temp", "temp_celsius", 10}, {"temp_alert_max", "temp_alert_max_celsius", 10},
	{"temp_alert_min", "temp_alert_min_celsius", 10}, {"temp_ambient", "temp_ambient_celsius", 10},
	{"temp_ambient_max", "temp_ambient_max_celsius", 10}, {"temp_ambient_min", "temp_ambient_min_celsius", 10},
	{"temp_max", "temp_max_celsius", 10}, {"temp_min", "temp_min_celsius", 10},
}

// textual are the info labels read from files (the label is the file name).
var textual = [...]string{"capacity_level", "charge_type", "health", "manufacturer", "model_name",
	"scope", "serial_number", "status", "technology", "type", "usb_type"}

type value struct {
	attr *sysattr.Attr
	desc *metric.Desc
	div  float64
}

type supply struct {
	values []value
	text   []*sysattr.Attr
	vals   [][]byte // power_supply, then one per text attribute
	info   *infodesc.Desc
}

// PowerSupply is the powersupplyclass plugin.
type PowerSupply struct {
	cfg  Config
	sups []*supply
}

// Init lists the supplies (those ignored_supplies does not drop) and the
// attributes their drivers provide.
func (p *PowerSupply) Init(env sampler.Env) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	ignore := regexp.MustCompile(p.cfg.IgnoredSupplies)
	dir := env.FS.Path("sys", "class", "power_supply")
	for _, name := range sysattr.Devices(dir) {
		if ignore.MatchString(name) {
			continue
		}
		dev := filepath.Join(dir, name)
		s := &supply{}
		for _, n := range numeric {
			if a := sysattr.Open(dev, n.file); a != nil {
				s.values = append(s.values, value{a, metric.NewDesc("node_power_supply_"+n.metric,
					n.metric+" value of /sys/class/power_supply/<power_supply>.", metric.Gauge, "power_supply", name), n.div})
			}
		}
		keys := []string{"power_supply"}
		for _, f := range textual {
			if a := sysattr.Open(dev, f); a != nil {
				s.text = append(s.text, a)
				keys = append(keys, f)
			}
		}
		s.vals = make([][]byte, len(keys))
		s.vals[0] = []byte(name)
		s.info = infodesc.New("node_power_supply_info", "info of /sys/class/power_supply/<power_supply>.", metric.Gauge, keys...)
		p.sups = append(p.sups, s)
	}
	if len(p.sups) == 0 {
		return sampler.ErrNotAvailable
	}
	return nil
}

// Sample reads every attribute; one the driver cannot give now is left
// out, a malformed one is an error naming the file.
func (p *PowerSupply) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var first error
	for _, s := range p.sups {
		for _, v := range s.values {
			n, err := v.attr.Int()
			if err != nil {
				if !sysattr.Absent(err) && first == nil {
					first = err
				}
				continue
			}
			b.Add(v.desc, float64(n)/v.div)
		}
		for i, a := range s.text {
			s.vals[1+i] = nil
			v, err := a.Read()
			if err != nil {
				if !sysattr.Absent(err) && first == nil {
					first = fmt.Errorf("%s: %w", a.Path(), err)
				}
				continue
			}
			s.vals[1+i] = v
		}
		b.Add(s.info.Get(s.vals), 1)
	}
	return first
}
