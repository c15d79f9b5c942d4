package filesystem

import (
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Mountinfo is the part of one /proc/<pid>/mountinfo line the plugin uses.
// The byte slices point into the parsed data and are still escaped (see
// Unescape).
type Mountinfo struct {
	ID, Parent uint64 // mount IDs of this mount and the one it sits on
	MountPoint []byte
	FSType     []byte
	Source     []byte
	// ReadOnly is set when the mount or its super block is read-only,
	// as /proc/mounts (which node_exporter reads) shows it.
	ReadOnly bool
}

// ErrFormat is wrapped by every mountinfo parse error.
var ErrFormat = errors.New("unexpected mountinfo format")

// ParseMountinfo scans mountinfo content (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// calling fn for every well-formed line; the slices in mi point into data.
// Malformed lines are skipped and the first problem is returned after the
// whole content was scanned, so one odd line does not hide every mount.
func ParseMountinfo(data []byte, fn func(mi Mountinfo)) error {
	var first error
	var mi Mountinfo
	for lineNo := 1; len(data) > 0; lineNo++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		if len(kernfs.TrimSpace(line)) == 0 {
			continue
		}
		if err := parseLine(line, &mi); err != nil {
			if first == nil {
				first = fmt.Errorf("%w: line %d: %w", ErrFormat, lineNo, err)
			}
			continue
		}
		fn(mi)
	}
	return first
}

func parseLine(line []byte, mi *Mountinfo) error {
	// mount ID, parent ID, major:minor, root, mount point, mount options
	var f [6][]byte
	rest := line
	for i := range f {
		f[i], rest = kernfs.NextField(rest)
		if len(f[i]) == 0 {
			return fmt.Errorf("%d fields before the optional ones, want %d", i, len(f))
		}
	}
	var ids [2]uint64
	for i, id := range f[:2] {
		v, err := kernfs.ParseUint(id)
		if err != nil {
			return fmt.Errorf("mount id %q: %w", id, err)
		}
		ids[i] = v
	}
	mi.ID, mi.Parent = ids[0], ids[1]
	if _, _, ok := kernfs.Cut(f[2], ':'); !ok {
		return fmt.Errorf("device number %q: want major:minor", f[2])
	}
	mi.MountPoint = f[4]
	mi.ReadOnly = hasOption(f[5], "ro")
	// Optional fields ("shared:1", ...) end with a lone "-".
	for {
		var opt []byte
		opt, rest = kernfs.NextField(rest)
		if len(opt) == 0 {
			return errors.New(`no "-" separator`)
		}
		if len(opt) == 1 && opt[0] == '-' {
			break
		}
	}
	var g [3][]byte // fs type, source, super options
	if n := kernfs.Fields(rest, g[:]); n < len(g) {
		return fmt.Errorf("%d fields after the separator, want %d", n, len(g))
	}
	mi.FSType, mi.Source = g[0], g[1]
	mi.ReadOnly = mi.ReadOnly || hasOption(g[2], "ro")
	return nil
}

// hasOption reports whether the comma-separated list opts contains opt.
func hasOption(opts []byte, opt string) bool {
	for len(opts) > 0 {
		var o []byte
		o, opts, _ = kernfs.Cut(opts, ',')
		if string(o) == opt {
			return true
		}
	}
	return false
}

// Unescape appends src to dst with the kernel's octal escapes (\040 space,
// \011 tab, \012 newline, \134 backslash) decoded; anything else is kept.
func Unescape(dst, src []byte) []byte {
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '\\' && i+3 < len(src) && isOctal(src[i+1]) && isOctal(src[i+2]) && isOctal(src[i+3]) && src[i+1] <= '3' {
			dst = append(dst, (src[i+1]-'0')<<6|(src[i+2]-'0')<<3|(src[i+3]-'0'))
			i += 3
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
