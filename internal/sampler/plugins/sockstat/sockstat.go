// Package sockstat samples /proc/net/sockstat and /proc/net/sockstat6
// (node_exporter's sockstat collector): sockets in use per protocol and
// the memory they hold.
package sockstat

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "sockstat",
		Description:  "socket counts from /proc/net/sockstat and sockstat6",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Sockstat{} },
		SampleConfig: sampleConfig,
	})
}

// maxPairs bounds the key/value pairs of one line (TCP has five).
const maxPairs = 16

// MaxLines bounds the lines of a file we keep descriptors for.
const MaxLines = 64

// line caches one line's shape ("TCP: inuse orphan tw alloc mem") and
// the descriptor of each value (and of mem_bytes, for "mem").
type line struct {
	sig   []byte
	descs []*metric.Desc
	bytes []*metric.Desc // mem_bytes, for the "mem" key; nil otherwise
}

type file struct {
	f      *kernfs.File
	absent bool
	lines  []line
}

// Sockstat is the sockstat plugin.
type Sockstat struct {
	files    [2]file
	pageSize float64
	sig      []byte
	tick     uint64
}

// Init resolves the two files under the root.
func (s *Sockstat) Init(env sampler.Env) error {
	for i, name := range [2]string{"sockstat", "sockstat6"} {
		s.files[i].f = kernfs.NewFile(env.FS.Path("proc", "net", name), 1024)
		s.files[i].f.NonBlocking = true
	}
	s.pageSize = float64(os.Getpagesize()) // "mem" counts pages
	return nil
}

// retryAbsentEvery ticks a missing file (sockstat6 without IPv6) is looked
// for again.
const retryAbsentEvery = 64

// Sample reads both files; a missing one is skipped.
func (s *Sockstat) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	s.tick++
	found := 0
	var first error
	for i := range s.files {
		f := &s.files[i]
		if f.absent && s.tick%retryAbsentEvery != 0 {
			continue
		}
		data, err := f.f.Read()
		f.absent = errors.Is(err, fs.ErrNotExist)
		if f.absent {
			continue
		}
		if err != nil {
			first = firstErr(first, err)
			continue
		}
		found++
		if err := s.parse(f, data, b); err != nil {
			first = firstErr(first, fmt.Errorf("%s: %w", f.f.Path(), err))
		}
	}
	if found == 0 && first == nil {
		return sampler.ErrNotAvailable
	}
	return first
}

func firstErr(have, err error) error {
	if have != nil {
		return have
	}
	return err
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

func (s *Sockstat) parse(f *file, data []byte, b *metric.Batch) error {
	var pairs [2 * maxPairs][]byte
	for i, n := 0, 1; len(data) > 0; n++ {
		var ln []byte
		ln, data = kernfs.NextLine(data)
		if len(kernfs.TrimSpace(ln)) == 0 {
			continue
		}
		proto, np, err := Split(ln, pairs[:])
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if i >= MaxLines {
			return fmt.Errorf("more than %d lines: %w", MaxLines, ErrFormat)
		}
		for len(f.lines) <= i {
			f.lines = append(f.lines, line{})
		}
		c := &f.lines[i]
		i++
		s.sig = append(s.sig[:0], proto...)
		for k := 0; k < np; k++ {
			s.sig = append(append(s.sig, ' '), pairs[2*k]...)
		}
		if c.sig == nil || !bytes.Equal(c.sig, s.sig) {
			for j := range f.lines[:i-1] { // a protocol line repeated (corrupt file)
				if bytes.Equal(f.lines[j].sig, s.sig) {
					return fmt.Errorf("line %d: %s listed twice: %w", n, proto, ErrFormat)
				}
			}
			c.sig = append(c.sig[:0], s.sig...)
			c.descs, c.bytes = c.descs[:0], c.bytes[:0]
			for k := 0; k < np; k++ {
				d, db := newDescs(proto, pairs[2*k])
				c.descs = append(c.descs, d)
				c.bytes = append(c.bytes, db)
			}
		}
		for k := 0; k < np; k++ {
			if c.descs[k] == nil {
				continue
			}
			v, err := kernfs.ParseInt(pairs[2*k+1])
			if err != nil {
				return fmt.Errorf("line %d: %s %s: value %q: %w", n, proto, pairs[2*k], pairs[2*k+1], ErrFormat)
			}
			b.Add(c.descs[k], float64(v))
			if c.bytes[k] != nil {
				b.Add(c.bytes[k], float64(v)*s.pageSize)
			}
		}
	}
	return nil
}

// newDescs names a value as node_exporter does; "sockets: used" is
// node_sockstat_sockets_used, "mem" also gets a _bytes twin.
func newDescs(proto, key []byte) (d, memBytes *metric.Desc) {
	if !validName(proto) || !validName(key) {
		return nil, nil
	}
	if string(proto) == "sockets" && string(key) == "used" {
		return metric.NewDesc("node_sockstat_sockets_used", "Number of IPv4 sockets in use.", metric.Gauge), nil
	}
	p, k := string(proto), string(key)
	d = metric.NewDesc("node_sockstat_"+p+"_"+k, "Number of "+p+" sockets in state "+k+".", metric.Gauge)
	if k == "mem" {
		memBytes = metric.NewDesc("node_sockstat_"+p+"_mem_bytes", "Number of "+p+" sockets in state mem_bytes.", metric.Gauge)
	}
	return d, memBytes
}

// Split parses "PROTO: key value key value ..." into proto and pairs
// (key, value, key, value ...) and returns the number of pairs.
func Split(ln []byte, pairs [][]byte) (proto []byte, n int, err error) {
	proto, rest, ok := kernfs.Cut(ln, ':')
	if !ok || len(proto) == 0 {
		return nil, 0, fmt.Errorf("want \"PROTO: key value ...\": %w", ErrFormat)
	}
	for k := 0; ; k++ {
		var f []byte
		if f, rest = kernfs.NextField(rest); len(f) == 0 {
			if k%2 != 0 {
				return nil, 0, fmt.Errorf("%s: a key without a value: %w", proto, ErrFormat)
			}
			return proto, k / 2, nil
		}
		if k >= len(pairs) {
			return nil, 0, fmt.Errorf("%s: more than %d values: %w", proto, len(pairs)/2, ErrFormat)
		}
		pairs[k] = f
	}
}

func validName(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return len(b) > 0
}
