// Package bonding counts the configured and active members of Linux
// bonding interfaces from /sys/class/net (node_exporter's bonding
// collector).
package bonding

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "bonding",
		Description:  "bonding interface members from /sys/class/net",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Bonding{} },
		SampleConfig: sampleConfig,
	})
}

// Bounds: bonds and members followed.
const (
	MaxBonds   = 256
	MaxMembers = 64
)

type member struct {
	name string
	mii  *kernfs.File
}

type bond struct {
	name           string
	slaves         *kernfs.File
	members        []member
	slavesD, activ *metric.Desc
	seen           uint64
}

// Bonding is the bonding plugin.
type Bonding struct {
	dir     string
	masters *kernfs.File
	bonds   []*bond
	tick    uint64
	absent  bool
}

// retryAbsentEvery ticks a missing bonding_masters is looked for again (the
// module loads when the first bond is made).
const retryAbsentEvery = 64

// Init resolves /sys/class/net under the root.
func (b *Bonding) Init(env sampler.Env) error {
	b.dir = env.FS.Path("sys", "class", "net")
	b.masters = kernfs.NewFile(filepath.Join(b.dir, "bonding_masters"), 256)
	return nil
}

var up = []byte("up")

// Sample reads bonding_masters, each bond's member list and each member's
// MII status; a member is active when that status is "up".
func (b *Bonding) Sample(_ context.Context, _ time.Time, batch *metric.Batch) error {
	b.tick++
	if b.absent && b.tick%retryAbsentEvery != 0 {
		return sampler.ErrNotAvailable
	}
	data, err := b.masters.Read()
	if b.absent = errors.Is(err, fs.ErrNotExist); b.absent {
		return sampler.ErrNotAvailable
	}
	if err != nil {
		return err
	}
	var first error
	for rest := data; ; {
		var name []byte
		name, rest = kernfs.NextField(kernfs.TrimSpace(rest))
		if len(name) == 0 {
			break
		}
		bd := b.bond(name)
		if bd == nil {
			if first == nil {
				first = fmt.Errorf("more than %d bonds", MaxBonds)
			}
			continue
		}
		bd.seen = b.tick
		total, active, err := b.count(bd)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		batch.Add(bd.slavesD, float64(total))
		batch.Add(bd.activ, float64(active))
	}
	kept := b.bonds[:0]
	for _, bd := range b.bonds {
		if bd.seen == b.tick {
			kept = append(kept, bd)
		} else {
			bd.close()
		}
	}
	clear(b.bonds[len(kept):])
	b.bonds = kept
	return first
}

func (b *Bonding) bond(name []byte) *bond {
	for _, bd := range b.bonds {
		if bd.name == string(name) {
			return bd
		}
	}
	if len(b.bonds) >= MaxBonds || string(name) == "." || string(name) == ".." || bytes.IndexByte(name, '/') >= 0 {
		return nil
	}
	n := string(name)
	bd := &bond{
		name:    n,
		slaves:  kernfs.NewFile(filepath.Join(b.dir, n, "bonding", "slaves"), 256),
		slavesD: metric.NewDesc("node_bonding_slaves", "Number of configured slaves per bonding interface.", metric.Gauge, "master", n),
		activ:   metric.NewDesc("node_bonding_active", "Number of active slaves per bonding interface.", metric.Gauge, "master", n),
	}
	b.bonds = append(b.bonds, bd)
	return bd
}

// count reads the member list, re-resolving the members' status files
// only when the list changed.
func (b *Bonding) count(bd *bond) (total, active int, err error) {
	data, err := bd.slaves.Read()
	if err != nil {
		return 0, 0, err
	}
	i := 0
	same := true
	for rest := kernfs.TrimSpace(data); ; i++ {
		var f []byte
		f, rest = kernfs.NextField(rest)
		if len(f) == 0 {
			break
		}
		if i >= len(bd.members) || bd.members[i].name != string(f) {
			same = false
		}
	}
	if !same || i != len(bd.members) {
		b.resolve(bd, data)
	}
	for _, m := range bd.members {
		st, err := m.mii.Read()
		if err != nil {
			return 0, 0, err
		}
		total++
		if bytes.Equal(kernfs.TrimSpace(st), up) {
			active++
		}
	}
	return total, active, nil
}

// resolve rebuilds a bond's members; a member's directory is lower_NAME,
// or slave_NAME on older kernels.
func (b *Bonding) resolve(bd *bond, list []byte) {
	bd.closeMembers()
	for rest := kernfs.TrimSpace(list); len(bd.members) < MaxMembers; {
		var f []byte
		f, rest = kernfs.NextField(rest)
		if len(f) == 0 {
			break
		}
		n := string(f)
		p := filepath.Join(b.dir, bd.name, "lower_"+n, "bonding_slave", "mii_status")
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			p = filepath.Join(b.dir, bd.name, "slave_"+n, "bonding_slave", "mii_status")
		}
		bd.members = append(bd.members, member{name: n, mii: kernfs.NewFile(p, 32)})
	}
}

func (bd *bond) closeMembers() {
	for _, m := range bd.members {
		m.mii.Close()
	}
	bd.members = bd.members[:0]
}

func (bd *bond) close() {
	bd.closeMembers()
	bd.slaves.Close()
}
