// Package mdadm samples Linux software RAID state from /proc/mdstat
// (node_exporter's mdadm collector).
package mdadm

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "mdadm",
		Description:  "software RAID state from /proc/mdstat",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Mdadm{} },
		SampleConfig: sampleConfig,
	})
}

// States are the activity states, in node_md_state's label values.
var States = [...]string{"active", "inactive", "recovering", "resync", "check"}

// Array is one md device as read from /proc/mdstat.
type Array struct {
	Name                  []byte // valid until the next read
	State                 int    // index into States
	Active, Failed, Spare int64
	Total                 int64 // disks the array needs
	Blocks, Synced        int64
}

type descs struct {
	seen                           uint64
	state                          [len(States)]*metric.Desc
	active, failed, spare          *metric.Desc
	required, blocks, blocksSynced *metric.Desc
}

// MaxArrays bounds the md devices followed.
const MaxArrays = 1024

// Mdadm is the mdadm plugin.
type Mdadm struct {
	file   *kernfs.File
	byName map[string]*descs
	tick   uint64
	absent bool // no md driver at the last look
}

// retryAbsentEvery ticks a missing /proc/mdstat is looked for again (the
// md module loads when the first array is assembled).
const retryAbsentEvery = 64

// Init resolves /proc/mdstat under the root.
func (m *Mdadm) Init(env sampler.Env) error {
	m.file = kernfs.NewFile(env.FS.Path("proc", "mdstat"), 4096)
	m.file.NonBlocking = true
	m.byName = map[string]*descs{}
	return nil
}

// Sample reads /proc/mdstat; without the md driver it is "not available".
func (m *Mdadm) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	m.tick++
	if m.absent && m.tick%retryAbsentEvery != 0 {
		return sampler.ErrNotAvailable
	}
	data, err := m.file.Read()
	if m.absent = errors.Is(err, fs.ErrNotExist); m.absent {
		return sampler.ErrNotAvailable
	}
	if err != nil {
		return err
	}
	var first error
	err = Parse(data, func(a Array) {
		d := m.descs(a.Name)
		if d == nil {
			if first == nil {
				first = fmt.Errorf("more than %d md devices, ignoring %s", MaxArrays, a.Name)
			}
			return
		}
		if d.seen == m.tick {
			if first == nil {
				first = fmt.Errorf("md device %s listed twice: %w", a.Name, ErrFormat)
			}
			return
		}
		d.seen = m.tick
		b.Add(d.required, float64(a.Total))
		b.Add(d.active, float64(a.Active))
		b.Add(d.failed, float64(a.Failed))
		b.Add(d.spare, float64(a.Spare))
		for i, sd := range d.state {
			v := 0.0
			if i == a.State {
				v = 1
			}
			b.Add(sd, v)
		}
		b.Add(d.blocks, float64(a.Blocks))
		b.Add(d.blocksSynced, float64(a.Synced))
	})
	for name, d := range m.byName {
		if d.seen != m.tick {
			delete(m.byName, name) // a stopped array loses its series
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", m.file.Path(), err)
	}
	return first
}

func (m *Mdadm) descs(name []byte) *descs {
	if d, ok := m.byName[string(name)]; ok {
		return d
	}
	if len(m.byName) >= MaxArrays {
		return nil
	}
	dev := string(name)
	const disks = "Number of active/failed/spare disks of device."
	d := &descs{
		active:       metric.NewDesc("node_md_disks", disks, metric.Gauge, "device", dev, "state", "active"),
		failed:       metric.NewDesc("node_md_disks", disks, metric.Gauge, "device", dev, "state", "failed"),
		spare:        metric.NewDesc("node_md_disks", disks, metric.Gauge, "device", dev, "state", "spare"),
		required:     metric.NewDesc("node_md_disks_required", "Total number of disks of device.", metric.Gauge, "device", dev),
		blocks:       metric.NewDesc("node_md_blocks", "Total number of blocks on device.", metric.Gauge, "device", dev),
		blocksSynced: metric.NewDesc("node_md_blocks_synced", "Number of blocks synced on device.", metric.Gauge, "device", dev),
	}
	for i, s := range States {
		d.state[i] = metric.NewDesc("node_md_state", "Indicates the state of md-device.", metric.Gauge, "device", dev, "state", s)
	}
	m.byName[dev] = d
	return d
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

var (
	personalities = []byte("Personalities")
	unused        = []byte("unused")
)

// Parse calls fn for every array in /proc/mdstat content, the way
// node_exporter's procfs reads it: the device line ("md0 : active raid1
// sdb1[1] sda1[0](F)"), the status line ("1953382464 blocks ... [2/1] [U_]"),
// an optional bitmap line and the sync line ("recovery = 12.6%
// (246784/1953382464) ..."). It stops at the first malformed array.
func Parse(data []byte, fn func(Array)) error {
	var lines [4][]byte
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		if len(kernfs.TrimSpace(line)) == 0 || line[0] == ' ' || line[0] == '\t' ||
			bytes.HasPrefix(line, personalities) || bytes.HasPrefix(line, unused) {
			continue
		}
		lines[0] = line
		rest := data
		for i := 1; i < 4; i++ { // node_exporter wants three more lines, even blank
			if len(rest) == 0 {
				return fmt.Errorf("line %d: array with fewer than 4 lines: %w", n, ErrFormat)
			}
			lines[i], rest = kernfs.NextLine(rest)
		}
		var a Array
		if err := parseArray(&lines, &a); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		fn(a)
	}
	return nil
}

func parseArray(lines *[4][]byte, a *Array) error {
	dev := lines[0]
	var f [3][]byte
	if kernfs.Fields(dev, f[:]) < 3 {
		return fmt.Errorf("device line %q: want \"mdN : state ...\": %w", clip(dev), ErrFormat)
	}
	a.Name = f[0]
	a.State = 0
	if string(f[2]) == "inactive" {
		a.State = 1
	}
	a.Failed = int64(bytes.Count(dev, []byte("(F)")))
	a.Spare = int64(bytes.Count(dev, []byte("(S)")))
	status := lines[1]
	size, _ := kernfs.NextField(status)
	v, err := kernfs.ParseUint(size)
	if err != nil {
		return fmt.Errorf("status line %q: want the size in blocks first: %w", clip(status), ErrFormat)
	}
	a.Blocks = int64(v)
	switch {
	case bytes.Contains(dev, []byte("raid0")) || bytes.Contains(dev, []byte("linear")):
		a.Total = int64(bytes.Count(dev, []byte("[")))
		a.Active = a.Total
	case bytes.Contains(dev, []byte("inactive")):
		a.Total, a.Active = 0, 0
	default:
		total, active, ok := counts(status)
		if !ok {
			return fmt.Errorf("status line %q: no [total/active] [U_] counts: %w", clip(status), ErrFormat)
		}
		a.Total, a.Active = total, active
	}
	sync := lines[2]
	if bytes.Contains(sync, []byte("bitmap")) {
		sync = lines[3]
	}
	a.Synced = a.Blocks
	recovering := bytes.Contains(sync, []byte("recovery"))
	resyncing := bytes.Contains(sync, []byte("resync"))
	checking := bytes.Contains(sync, []byte("check"))
	if recovering || resyncing || checking {
		switch {
		case recovering:
			a.State = 2
		case checking:
			a.State = 4
		default:
			a.State = 3
		}
		if bytes.Contains(sync, []byte("PENDING")) || bytes.Contains(sync, []byte("DELAYED")) {
			a.Synced = 0
		} else {
			done, ok := synced(sync)
			if !ok {
				return fmt.Errorf("sync line %q: no (done/total) blocks: %w", clip(sync), ErrFormat)
			}
			a.Synced = done
		}
	}
	return nil
}

// counts finds "[total/active] [U_...]" in a status line, the last such
// bracket pair followed by a [U_] map, as the regular expression
// `(\d+) blocks .*\[(\d+)/(\d+)\] \[[U_]+\]` does.
func counts(status []byte) (total, active int64, ok bool) {
	if !bytes.Contains(status, []byte(" blocks ")) {
		return 0, 0, false
	}
	for end := len(status); end > 0; {
		i := bytes.LastIndexByte(status[:end], '[')
		if i < 0 {
			return 0, 0, false
		}
		end = i
		j := bytes.IndexByte(status[i:], ']')
		if j < 0 {
			continue
		}
		inner := status[i+1 : i+j]
		t, a, found := kernfs.Cut(inner, '/')
		if !found {
			continue
		}
		after := status[i+j+1:]
		if len(after) < 3 || after[0] != ' ' || after[1] != '[' || !isMap(after[2:]) {
			continue
		}
		tv, err1 := kernfs.ParseUint(t)
		av, err2 := kernfs.ParseUint(a)
		if err1 != nil || err2 != nil {
			continue
		}
		return int64(tv), int64(av), true
	}
	return 0, 0, false
}

// isMap reports whether b starts with one or more of U and _ then ']'.
func isMap(b []byte) bool {
	n := 0
	for n < len(b) && (b[n] == 'U' || b[n] == '_') {
		n++
	}
	return n > 0 && n < len(b) && b[n] == ']'
}

// synced finds the first "(done/total)" in a sync line.
func synced(line []byte) (int64, bool) {
	for i := 0; i < len(line); i++ {
		if line[i] != '(' {
			continue
		}
		j := bytes.IndexByte(line[i:], ')')
		if j < 0 {
			return 0, false
		}
		d, t, found := kernfs.Cut(line[i+1:i+j], '/')
		if !found {
			continue
		}
		dv, err1 := kernfs.ParseUint(d)
		_, err2 := kernfs.ParseUint(t)
		if err1 != nil || err2 != nil {
			continue
		}
		return int64(dv), true
	}
	return 0, false
}

func clip(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}
