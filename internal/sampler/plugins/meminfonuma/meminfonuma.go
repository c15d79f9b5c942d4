// Package meminfonuma samples per-NUMA-node memory from
// /sys/devices/system/node/node*/{meminfo,numastat} (node_exporter's
// meminfo_numa collector, off by default as there).
package meminfonuma

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
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/memory"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "meminfo_numa",
		Description:  "per-NUMA-node meminfo and numastat",
		Default:      false,
		New:          func(sampler.Configurable) sampler.Plugin { return &Plugin{} },
		SampleConfig: sampleConfig,
	})
}

// Bounds: NUMA nodes followed, and distinct series remembered (a kernel
// has about 50 fields per node).
const (
	MaxNodes  = 1024
	MaxSeries = 1 << 16
)

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

type series struct {
	desc *metric.Desc
	seen uint64
}

type node struct {
	id                 string // the number in nodeN
	meminfo, numastat  *kernfs.File
	memLines, statLine kernfs.LineCache[*series]
	seen               uint64
}

// Plugin is the meminfo_numa plugin.
type Plugin struct {
	dir   *kernfs.Dir
	nodes []*node
	byKey map[string]*series // node label + "\x00" + metric name
	scan  uint64             // listings made
	every sysattr.Rescan
}

// Init resolves /sys/devices/system/node under the root.
func (p *Plugin) Init(env sampler.Env) error {
	p.dir = kernfs.NewDir(env.FS.Path("sys", "devices", "system", "node"))
	p.byKey = map[string]*series{}
	return nil
}

var nodePrefix = []byte("node")

// rescan lists nodeN directories, keeping the state of known ones.
func (p *Plugin) rescan() error {
	ents, err := p.dir.List()
	if err != nil {
		return err
	}
	p.scan++
	for _, e := range ents {
		id, ok := bytes.CutPrefix(e.Name, nodePrefix)
		if !ok || len(id) == 0 || id[0] < '0' || id[0] > '9' {
			continue
		}
		var n *node
		for _, k := range p.nodes {
			if k.id == string(id) {
				n = k
				break
			}
		}
		if n == nil {
			if len(p.nodes) >= MaxNodes {
				continue
			}
			path := p.dir.Path() + "/" + string(e.Name)
			n = &node{id: string(id), meminfo: kernfs.NewFile(path+"/meminfo", 4096), numastat: kernfs.NewFile(path+"/numastat", 512)}
			n.meminfo.NonBlocking, n.numastat.NonBlocking = true, true // generated in memory
			p.nodes = append(p.nodes, n)
		}
		n.seen = p.scan
	}
	kept := p.nodes[:0]
	for _, n := range p.nodes {
		if n.seen == p.scan {
			kept = append(kept, n)
		} else {
			n.meminfo.Close()
			n.numastat.Close()
		}
	}
	clear(p.nodes[len(kept):])
	p.nodes = kept
	return nil
}

// Sample reads every node's two files; a node whose files fail is an error
// but the others are still reported.
func (p *Plugin) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if err := p.every.Tick(p.rescan); errors.Is(err, fs.ErrNotExist) {
		return sampler.ErrNotAvailable
	} else if err != nil {
		return err
	}
	var first error
	for _, n := range p.nodes {
		if err := p.sampleNode(n, b); err != nil && first == nil {
			first = err
		}
	}
	return first
}

var kB = []byte("kB")

func (p *Plugin) sampleNode(n *node, b *metric.Batch) error {
	data, err := n.meminfo.Read()
	if err != nil {
		return err
	}
	var first error
	line := 0
	for len(data) > 0 {
		var l []byte
		l, data = kernfs.NextLine(data)
		var f [6][]byte
		k := kernfs.Fields(l, f[:])
		if k == 0 {
			continue
		}
		line++
		if k < 4 || k > 5 || k == 5 && !bytes.Equal(f[4], kB) || len(f[2]) < 2 || f[2][len(f[2])-1] != ':' {
			if first == nil {
				first = fmt.Errorf("%s: line %q: want \"Node N Name: value [kB]\": %w", n.meminfo.Path(), clip(l), ErrFormat)
			}
			continue
		}
		v, err := kernfs.ParseInt(f[3])
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s: line %q: %w", n.meminfo.Path(), clip(l), err)
			}
			continue
		}
		val := float64(v)
		if k == 5 {
			val *= 1024
		}
		name := f[2][:len(f[2])-1]
		s, ok := n.memLines.Get(line, name)
		if !ok || s.desc.Labels[0].Value != string(f[1]) {
			if s, err = p.series(f[1], name, false); err != nil {
				if first == nil {
					first = fmt.Errorf("%s: %w", n.meminfo.Path(), err)
				}
				continue
			}
			n.memLines.Put(line, name, s)
		}
		if s.seen == p.every.Ticks() {
			continue // listed twice: the first stands
		}
		s.seen = p.every.Ticks()
		b.Add(s.desc, val)
	}
	data, err = n.numastat.Read()
	if err != nil {
		return err
	}
	line = 0
	for len(data) > 0 {
		var l []byte
		l, data = kernfs.NextLine(data)
		var f [3][]byte
		k := kernfs.Fields(l, f[:])
		if k == 0 {
			continue
		}
		line++
		v, err := kernfs.ParseUint(f[1])
		if k != 2 || err != nil {
			if first == nil {
				first = fmt.Errorf("%s: line %q: want \"name value\": %w", n.numastat.Path(), clip(l), ErrFormat)
			}
			continue
		}
		s, ok := n.statLine.Get(line, f[0])
		if !ok {
			if s, err = p.series([]byte(n.id), f[0], true); err != nil {
				if first == nil {
					first = fmt.Errorf("%s: %w", n.numastat.Path(), err)
				}
				continue
			}
			n.statLine.Put(line, f[0], s)
		}
		if s.seen == p.every.Ticks() {
			continue
		}
		s.seen = p.every.Ticks()
		b.Add(s.desc, float64(v))
	}
	return first
}

// series returns the series of a meminfo field (Active(anon) becomes
// node_memory_numa_Active_anon, a gauge) or a numastat counter (numa_hit
// becomes node_memory_numa_numa_hit_total) of one node.
func (p *Plugin) series(nodeLabel, field []byte, counter bool) (*series, error) {
	key, ok := memory.MetricKey(field)
	if !ok {
		return nil, fmt.Errorf("field name %q cannot be a metric name: %w", clip(field), ErrFormat)
	}
	typ := metric.Gauge
	if counter {
		key += "_total"
		typ = metric.Counter
	}
	k := string(nodeLabel) + "\x00" + key
	if s := p.byKey[k]; s != nil {
		return s, nil
	}
	if len(p.byKey) >= MaxSeries {
		return nil, fmt.Errorf("more than %d series, ignoring %s", MaxSeries, field)
	}
	s := &series{desc: metric.NewDesc("node_memory_numa_"+key, "Memory information field "+key+".", typ, "node", string(nodeLabel))}
	p.byKey[k] = s
	return s, nil
}

func clip(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}
