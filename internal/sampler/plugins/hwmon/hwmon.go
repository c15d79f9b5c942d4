// Package hwmon samples hardware sensors under /sys/class/hwmon
// (node_exporter's hwmon collector): temperatures, fans, voltages, power.
package hwmon

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval is longer than the sampler's: some sensors are read over
// I2C, IPMI or an NVMe admin command, which takes milliseconds.
const DefaultInterval = 10 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "hwmon",
		Description: "hardware sensors (temperature, fan, voltage, power) from /sys/class/hwmon",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &sampler.Common{Interval: sampler.Duration(DefaultInterval)}
		},
		New:          func(sampler.Configurable) sampler.Plugin { return &Hwmon{} },
		SampleConfig: sampleConfig,
	})
}

// sensorTypes are the file name prefixes node_exporter reads.
var sensorTypes = []string{"vrm", "beep_enable", "update_interval", "in", "cpu", "fan",
	"pwm", "temp", "curr", "power", "energy", "humidity", "intrusion"}

// MaxFiles bounds the sensor files followed.
const MaxFiles = 4096

// reading is one sensor file and how its value is exported.
type reading struct {
	f     *kernfs.File
	d     *metric.Desc
	scale float64
	beep  bool // beep_enable: 1 when the content is "1", else 0
}

// Hwmon is the hwmon plugin.
type Hwmon struct {
	readings []reading
	static   []*metric.Desc // chip names and sensor labels, value 1
}

// Init lists the chips and their sensor files (drivers register them at
// boot) and decides each file's series, as node_exporter does per scrape.
func (h *Hwmon) Init(env sampler.Env) error {
	base := env.FS.Path("sys", "class", "hwmon")
	ents, err := os.ReadDir(base)
	if err != nil {
		return sampler.ErrNotAvailable // no hwmon: the plugin is left out
	}
	for _, e := range ents {
		dir := filepath.Join(base, e.Name())
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		if err := h.chip(dir); err != nil {
			return err
		}
	}
	if len(h.readings) == 0 && len(h.static) == 0 {
		return sampler.ErrNotAvailable
	}
	return nil
}

// Sample reads every sensor file; one that fails or does not hold a number
// now (a sleeping or absent sensor) is left out of the tick.
func (h *Hwmon) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if len(h.readings) == 0 && len(h.static) == 0 {
		return sampler.ErrNotAvailable
	}
	for _, d := range h.static {
		b.Add(d, 1)
	}
	for _, r := range h.readings {
		data, err := r.f.Read()
		if err != nil {
			continue
		}
		line, _ := kernfs.NextLine(data)
		if r.beep {
			v := 0.0
			if string(line) == "1" {
				v = 1
			}
			b.Add(r.d, v)
			continue
		}
		v, ok := ParseValue(line)
		if !ok {
			continue
		}
		b.Add(r.d, v*r.scale)
	}
	return nil
}

// ParseValue reads a sensor value (an integer, rarely a decimal).
func ParseValue(b []byte) (float64, bool) {
	b = kernfs.TrimSpace(b)
	if v, err := kernfs.ParseInt(b); err == nil {
		return float64(v), true
	}
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	v, err := kernfs.ParseFixed(b)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func (h *Hwmon) chip(dir string) error {
	chip, err := chipName(dir)
	if err != nil {
		return nil // node_exporter skips such a chip with an error; nothing to export
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "name")); err == nil {
		if n := CleanName(string(raw)); n != "" {
			h.static = append(h.static, metric.NewDesc("node_hwmon_chip_names",
				"Annotation metric for human-readable chip names", metric.Gauge, "chip", chip, "chip_name", n))
		}
	}
	// sensor -> property -> file; files under device/ override the chip's own.
	data := map[string]map[string]string{}
	collect(dir, data)
	if _, err := os.Stat(filepath.Join(dir, "device")); err == nil {
		collect(filepath.Join(dir, "device"), data)
	}
	sensors := make([]string, 0, len(data))
	for s := range data {
		sensors = append(sensors, s)
	}
	sort.Strings(sensors)
	for _, sensor := range sensors {
		props := data[sensor]
		_, typ, _, _ := Explode(sensor)
		if lf, ok := props["label"]; ok {
			if raw, err := os.ReadFile(lf); err == nil {
				// The label as the driver wrote it (node_exporter 1.5 keeps
				// it as is), cut at 256 bytes.
				if l := string(infodesc.Clip([]byte(strings.Trim(string(raw), "\n")))); l != "" {
					h.static = append(h.static, metric.NewDesc("node_hwmon_sensor_label",
						"Label for given chip and sensor", metric.Gauge, "chip", chip, "sensor", sensor, "label", l))
				}
			}
		}
		labels := []string{"chip", chip, "sensor", sensor}
		switch typ {
		case "beep_enable":
			h.add(props[""], "node_hwmon_beep_enabled", "Hardware beep enabled", metric.Gauge, 1, true, labels)
			continue
		case "vrm":
			h.add(props[""], "node_hwmon_voltage_regulator_version", "Hardware voltage regulator", metric.Gauge, 1, false, labels)
			continue
		case "update_interval":
			h.add(props[""], "node_hwmon_update_interval_seconds", "Hardware monitor update interval", metric.Gauge, 0.001, false, labels)
			continue
		}
		elems := make([]string, 0, len(props))
		for e := range props {
			elems = append(elems, e)
		}
		sort.Strings(elems)
		_, hasBare := props[""]
		for _, element := range elems {
			if element == "label" {
				continue
			}
			name := "node_hwmon_" + typ
			if element == "input" {
				if hasBare {
					name += "_input"
				}
			} else if element != "" {
				name += "_" + CleanName(element)
			}
			name, help, mtype, scale := series(typ, element, name)
			h.add(props[element], name, help, mtype, scale, false, labels)
		}
	}
	if len(h.readings) > MaxFiles {
		return fmt.Errorf("more than %d hwmon sensor files", MaxFiles)
	}
	return nil
}

// series names a sensor element's series and unit, as node_exporter does.
func series(typ, element, name string) (string, string, metric.Type, float64) {
	switch {
	case element == "fault" || element == "alarm":
		return name, "Hardware sensor " + element + " status (" + typ + ")", metric.Gauge, 1
	case element == "beep":
		return name + "_enabled", "Hardware monitor sensor has beeping enabled", metric.Gauge, 1
	case typ == "in" || typ == "cpu":
		return name + "_volts", "Hardware monitor for voltage (" + element + ")", metric.Gauge, 0.001
	case typ == "temp" && element != "type":
		if element == "" {
			element = "input"
		}
		return name + "_celsius", "Hardware monitor for temperature (" + element + ")", metric.Gauge, 0.001
	case typ == "curr":
		return name + "_amps", "Hardware monitor for current (" + element + ")", metric.Gauge, 0.001
	case typ == "energy":
		return name + "_joule_total", "Hardware monitor for joules used so far (" + element + ")", metric.Counter, 1 / 1000000.0
	case typ == "power" && element == "accuracy":
		return name, "Hardware monitor power meter accuracy, as a ratio", metric.Gauge, 1 / 1000000.0
	case typ == "power" && (element == "average_interval" || element == "average_interval_min" || element == "average_interval_max"):
		return name + "_seconds", "Hardware monitor power usage update interval (" + element + ")", metric.Gauge, 0.001
	case typ == "power":
		return name + "_watt", "Hardware monitor for power usage in watts (" + element + ")", metric.Gauge, 1 / 1000000.0
	case typ == "humidity":
		return name, "Hardware monitor for humidity, as a ratio (multiply with 100.0 to get the humidity as a percentage) (" + element + ")", metric.Gauge, 1 / 1000000.0
	case typ == "fan" && (element == "input" || element == "min" || element == "max" || element == "target"):
		return name + "_rpm", "Hardware monitor for fan revolutions per minute (" + element + ")", metric.Gauge, 1
	}
	return name, "Hardware monitor " + typ + " element " + element, metric.Gauge, 1
}

func (h *Hwmon) add(path, name, help string, typ metric.Type, scale float64, beep bool, labels []string) {
	if path == "" {
		return
	}
	h.readings = append(h.readings, reading{f: kernfs.NewFile(path, 64),
		d: metric.NewDesc(name, help, typ, labels...), scale: scale, beep: beep})
}

// collect adds the sensor files of dir to data.
func collect(dir string, data map[string]map[string]string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		ok, typ, num, prop := Explode(e.Name())
		if !ok || !known(typ) {
			continue
		}
		sensor := typ + strconv.Itoa(num)
		if data[sensor] == nil {
			data[sensor] = map[string]string{}
		}
		data[sensor][prop] = filepath.Join(dir, e.Name())
	}
}

func known(typ string) bool {
	for _, t := range sensorTypes {
		if t == typ {
			return true
		}
	}
	return false
}

// Explode splits a sensor file name "<type><num>_<property>" the way
// node_exporter's ^([^0-9]+)([0-9]*)?(_(.+))?$ does.
func Explode(name string) (ok bool, typ string, num int, prop string) {
	i := 0
	for i < len(name) && (name[i] < '0' || name[i] > '9') {
		i++
	}
	if i == 0 {
		return false, "", 0, ""
	}
	// The type is greedy: it swallows "_property" when no digits follow.
	if i == len(name) {
		return true, name, 0, ""
	}
	typ = name[:i]
	j := i
	for j < len(name) && name[j] >= '0' && name[j] <= '9' {
		j++
	}
	n, err := strconv.Atoi(name[i:j])
	if err != nil {
		return false, "", 0, ""
	}
	rest := name[j:]
	switch {
	case rest == "":
		return true, typ, n, ""
	case len(rest) > 1 && rest[0] == '_':
		return true, typ, n, rest[1:]
	}
	return false, "", 0, ""
}

// chipName is node_exporter's stable chip label: <bus>_<device> of the
// device the chip belongs to, else its name file, else hwmonN.
func chipName(dir string) (string, error) {
	if dev, err := filepath.EvalSymlinks(filepath.Join(dir, "device")); err == nil {
		prefix, devName := filepath.Split(dev)
		_, devType := filepath.Split(strings.TrimRight(prefix, "/"))
		n, t := CleanName(devName), CleanName(devType)
		if t != "" && n != "" {
			return t + "_" + n, nil
		}
		if n != "" {
			return n, nil
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "name")); err == nil {
		if n := CleanName(string(raw)); n != "" {
			return n, nil
		}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if n := CleanName(filepath.Base(real)); n != "" {
		return n, nil
	}
	return "", errors.New("no name for " + dir)
}

// CleanName lowercases s, replaces anything but [a-z0-9:_] with '_' and
// trims '_' at both ends.
func CleanName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == ':' || c == '_') {
			b[i] = '_'
		}
	}
	return strings.Trim(string(b), "_")
}
