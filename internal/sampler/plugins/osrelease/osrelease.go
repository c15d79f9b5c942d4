// Package osrelease exports node_os_info and node_os_version from
// os-release (node_exporter's os collector).
package osrelease

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"io/fs"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "os",
		Description:  "node_os_info and node_os_version from /etc/os-release",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &OS{} },
		SampleConfig: sampleConfig,
	})
}

// Keys are the os-release variables exported, in node_os_info's label order.
var Keys = [...]string{"BUILD_ID", "ID", "ID_LIKE", "IMAGE_ID", "IMAGE_VERSION", "NAME", "PRETTY_NAME",
	"VARIANT", "VARIANT_ID", "VERSION", "VERSION_CODENAME", "VERSION_ID", "SUPPORT_END"}

// Indexes into Keys used on their own.
const (
	kID         = 1
	kIDLike     = 2
	kName       = 5
	kVersionID  = 11
	kSupportEnd = 12
	numInfo     = 12 // SUPPORT_END is not a node_os_info label
)

// rereadEvery ticks the file is opened and read afresh; in between the
// last values are reported. os-release changes only with an upgrade, which
// replaces the file (often a symlink) rather than rewriting it, and reading
// a regular file each tick would wake the Go scheduler's sysmon thread.
const rereadEvery = 64

// maxSize bounds the file: os-release is a few hundred bytes.
const maxSize = 64 << 10

// OS is the os plugin.
type OS struct {
	files [2]*kernfs.File // /etc/os-release, then /usr/lib/os-release
	err   error           // of the last read, reported until the next one
	tick  uint64
	prev  []byte // content last parsed
	vals  [len(Keys)][]byte
	owned [len(Keys)][]byte // vals copied out of prev's storage

	info, version *infodesc.Desc
	supportEnd    *metric.Desc
	versionVal    float64
	supportEndVal float64
	hasSupportEnd bool
}

// Init resolves both candidate files under the root.
func (o *OS) Init(env sampler.Env) error {
	o.files[0] = kernfs.NewFile(env.FS.Path("etc", "os-release"), 1024)
	o.files[1] = kernfs.NewFile(env.FS.Path("usr", "lib", "os-release"), 1024)
	o.info = infodesc.New("node_os_info",
		"A metric with a constant '1' value labeled by build_id, id, id_like, image_id, image_version, "+
			"name, pretty_name, variant, variant_id, version, version_codename, version_id.", metric.Gauge,
		"build_id", "id", "id_like", "image_id", "image_version", "name", "pretty_name",
		"variant", "variant_id", "version", "version_codename", "version_id")
	o.version = infodesc.New("node_os_version", "Metric containing the major.minor part of the OS version.",
		metric.Gauge, "id", "id_like", "name")
	o.supportEnd = metric.NewDesc("node_os_support_end_timestamp_seconds",
		"Metric containing the end-of-life date timestamp of the OS.", metric.Gauge)
	return nil
}

// Sample reports os-release, re-read every rereadEvery ticks and parsed
// again only when it changed.
func (o *OS) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	o.tick++
	if o.tick == 1 || o.tick%rereadEvery == 0 {
		o.err = o.read()
	}
	if o.err != nil {
		return o.err
	}
	b.Add(o.info.Get(o.vals[:numInfo]), 1)
	if o.versionVal > 0 {
		v := [3][]byte{o.vals[kID], o.vals[kIDLike], o.vals[kName]}
		b.Add(o.version.Get(v[:]), o.versionVal)
	}
	if o.hasSupportEnd {
		b.Add(o.supportEnd, o.supportEndVal)
	}
	return nil
}

func (o *OS) read() error {
	var data []byte
	var err error
	defer o.files[0].Close() // a fresh open next time sees a replaced file
	defer o.files[1].Close()
	for _, f := range o.files { // /etc/os-release first, as node_exporter
		if data, err = f.Read(); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		o.prev = nil
		if errors.Is(err, fs.ErrNotExist) {
			return sampler.ErrNotAvailable
		}
		return err
	}
	if len(data) > maxSize {
		data = data[:maxSize]
	}
	if o.prev == nil || !bytes.Equal(data, o.prev) {
		o.update(data)
	}
	return nil
}

func (o *OS) update(data []byte) {
	o.prev = append(o.prev[:0], data...)
	var vals [len(Keys)][]byte
	Parse(data, &vals)
	for i, v := range vals {
		o.owned[i] = append(o.owned[i][:0], v...)
		o.vals[i] = o.owned[i]
	}
	o.versionVal = MajorMinor(o.vals[kVersionID])
	o.hasSupportEnd = false
	if len(o.vals[kSupportEnd]) > 0 {
		if t, err := time.Parse(time.DateOnly, string(o.vals[kSupportEnd])); err == nil {
			o.supportEndVal, o.hasSupportEnd = float64(t.Unix()), true
		}
	}
}

// MajorMinor is the leading "digits[.digits]" of VERSION_ID as a number,
// 0 when there is none.
func MajorMinor(v []byte) float64 {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0
	}
	if i < len(v) && v[i] == '.' {
		i++
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
	}
	x, err := strconv.ParseFloat(string(v[:i]), 64)
	if err != nil {
		return 0
	}
	return x
}

// Parse sets vals[i] to the value of Keys[i] in os-release content
// (shell-style KEY=value lines; quotes removed, backslash escapes in double
// quotes resolved in place, so data is modified). Unknown keys, comments
// and malformed lines are ignored; a later assignment wins.
func Parse(data []byte, vals *[len(Keys)][]byte) {
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		line = kernfs.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		line = bytes.TrimPrefix(line, []byte("export "))
		key, val, ok := kernfs.Cut(line, '=')
		if !ok {
			continue
		}
		for i, k := range Keys {
			if string(key) == k {
				vals[i] = unquote(val)
				break
			}
		}
	}
}

// unquote removes shell quoting from v in place.
func unquote(v []byte) []byte {
	out := v[:0]
	var quote byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote != 0 && c == quote:
			quote = 0
		case quote != '\'' && c == '\\' && i+1 < len(v):
			i++
			out = append(out, v[i])
		case quote == 0 && (c == ' ' || c == '\t' || c == '#'):
			return out // an unquoted blank ends the value
		default:
			out = append(out, c)
		}
	}
	return out
}
