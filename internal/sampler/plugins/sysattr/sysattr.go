// Package sysattr reads the one-value attribute files of sysfs class
// devices (/sys/class/watchdog/watchdog0/timeout, …) for the plugins that
// follow such devices: files opened once, values parsed in place.
package sysattr

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// MaxDevices bounds the devices a plugin follows in one class.
const MaxDevices = 4096

// Devices lists the entries of a class directory (symlinks to the
// devices), sorted; nil when the directory does not exist.
func Devices(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	if len(names) > MaxDevices {
		names = names[:MaxDevices]
	}
	return names
}

// Attr is one attribute file.
type Attr struct {
	f *kernfs.File
}

// Open returns the attribute dir/name, or nil when the file does not exist
// (drivers create their attributes when the device appears).
func Open(dir, name string) *Attr {
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	return &Attr{f: kernfs.NewFile(p, 64)}
}

// Path is the attribute's file.
func (a *Attr) Path() string { return a.f.Path() }

// Read returns the first line of the attribute without surrounding
// blanks; the slice is valid until the next Read.
func (a *Attr) Read() ([]byte, error) {
	data, err := a.f.Read()
	if err != nil {
		return nil, err
	}
	line, _ := kernfs.NextLine(data)
	return kernfs.TrimSpace(line), nil
}

// Int reads the attribute as an integer in Go syntax (decimal, 0x hex, 0
// octal), as procfs's value parser does.
func (a *Attr) Int() (int64, error) {
	b, err := a.Read()
	if err != nil {
		return 0, err
	}
	v, ok := ParseInt(b)
	if !ok {
		return 0, fmt.Errorf("%s: %q is not an integer", a.f.Path(), clip(b))
	}
	return v, nil
}

// Absent reports an error that means the value is not there now (a
// sleeping device, a driver without the operation): skipped, not counted.
func Absent(err error) bool {
	return errors.Is(err, syscall.ENODATA) || errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, os.ErrNotExist)
}

// ParseInt parses an integer like strconv.ParseInt(s, 0, 64), without
// allocating: optional sign, then 0x/0X hex, 0o/0O or leading-0 octal,
// 0b/0B binary, or decimal.
func ParseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	v, ok := ParseUint(b)
	switch {
	case !ok || len(b) > 0 && (b[0] == '+' || b[0] == '-'):
		return 0, false
	case neg && v <= 1<<63:
		return -int64(v), true
	case !neg && v <= 1<<63-1:
		return int64(v), true
	}
	return 0, false
}

// ParseUint parses an unsigned integer like strconv.ParseUint(s, 0, 64)
// (0x, 0o, 0b prefixes, leading-0 octal), without allocating.
func ParseUint(b []byte) (uint64, bool) {
	base := uint64(10)
	if len(b) > 1 && b[0] == '0' {
		switch b[1] {
		case 'x', 'X':
			base, b = 16, b[2:]
		case 'o', 'O':
			base, b = 8, b[2:]
		case 'b', 'B':
			base, b = 2, b[2:]
		default:
			base, b = 8, b[1:]
		}
	}
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base || v > (1<<64-1-d)/base {
			return 0, false
		}
		v = v*base + d
	}
	return v, true
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// RescanEvery is how many ticks apart a plugin that follows a module's
// directory (bcache, btrfs, zfs, NUMA nodes) lists it again: devices come
// and go rarely, and a listing costs more than a tick's reads.
const RescanEvery = 64

// Rescan runs a plugin's listing on its first tick and every RescanEvery
// ticks after, and remembers whether the directory was missing (module not
// loaded), so the ticks between cost nothing.
type Rescan struct {
	tick   uint64
	absent bool
}

// Tick counts a tick and lists again when due. It returns an error
// matching os.ErrNotExist while the directory is missing (the plugin
// reports "not available"), list's other errors, or nil.
func (r *Rescan) Tick(list func() error) error {
	r.tick++
	if r.tick%RescanEvery != 1 {
		if r.absent {
			return os.ErrNotExist
		}
		return nil
	}
	err := list()
	r.absent = errors.Is(err, os.ErrNotExist)
	return err
}

// Ticks is the number of ticks counted, for plugins that mark what a
// listing saw.
func (r *Rescan) Ticks() uint64 { return r.tick }

// Info is a device's textual attributes, read each tick as the label
// values of its info series: the device's name first, then one value per
// attribute ("" where the device has no such file or the driver cannot
// give it now).
type Info struct {
	attrs []*Attr
	vals  [][]byte
	// Trim, if set, rewrites attribute i's value (e.g. drops a "0x").
	Trim func(i int, v []byte) []byte
}

// OpenInfo opens the attributes names of the device dir named name.
func OpenInfo(dir, name string, names []string) *Info {
	in := &Info{attrs: make([]*Attr, len(names)), vals: make([][]byte, 1+len(names))}
	for i, n := range names {
		in.attrs[i] = Open(dir, n)
	}
	in.vals[0] = []byte(name)
	return in
}

// Read re-reads the attributes and returns the label values (valid until
// the next Read) and the first error that is not an absent value, naming
// its file.
func (in *Info) Read() ([][]byte, error) {
	var first error
	for i, a := range in.attrs {
		in.vals[1+i] = nil
		if a == nil {
			continue
		}
		v, err := a.Read()
		if err != nil {
			if !Absent(err) && first == nil {
				first = fmt.Errorf("%s: %w", a.Path(), err)
			}
			continue
		}
		if in.Trim != nil {
			v = in.Trim(i, v)
		}
		in.vals[1+i] = v
	}
	return in.vals, first
}
