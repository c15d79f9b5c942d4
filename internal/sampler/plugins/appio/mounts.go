package appio

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// maxMounts bounds the mount table kept from mountinfo.
const maxMounts = 8192

// mount is one line of mountinfo.
type mount struct {
	point, fstype string
}

// mountTable maps paths to their file system. It is replaced whole when
// mountinfo changes, so readers need no lock.
type mountTable struct {
	raw    []byte // the mountinfo it was parsed from
	mounts []mount
}

// parseMountinfo reads the mount point (field 5, octal escapes undone)
// and file system type (first field after " - ") of each line; lines
// that do not parse are skipped, and at most maxMounts are kept.
func parseMountinfo(data []byte) []mount {
	var out []mount
	var fields [6][]byte
	for len(data) > 0 && len(out) < maxMounts {
		var line []byte
		line, data = kernfs.NextLine(data)
		if kernfs.Fields(line, fields[:]) < 6 {
			continue
		}
		sep := bytes.Index(line, []byte(" - "))
		if sep < 0 {
			continue
		}
		fstype, _ := kernfs.NextField(line[sep+3:])
		point := unescape(fields[4])
		if len(fstype) == 0 || len(point) == 0 || point[0] != '/' {
			continue
		}
		out = append(out, mount{point: point, fstype: labelSafe(string(fstype))})
	}
	return out
}

// unescape undoes the kernel's \ooo escapes of space, tab, newline and
// backslash in mountinfo paths.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return labelSafe(string(b))
	}
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && isOctal(b[i+1]) && isOctal(b[i+2]) && isOctal(b[i+3]) {
			sb.WriteByte((b[i+1]-'0')<<6 | (b[i+2]-'0')<<3 | (b[i+3] - '0'))
			i += 3
			continue
		}
		sb.WriteByte(b[i])
	}
	return labelSafe(sb.String())
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// labelSafe makes s a valid label value (UTF-8).
func labelSafe(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// lookup returns the mount holding path: the longest mount point that is
// path or a parent directory of it, the later line winning a tie (it is
// mounted over the earlier). ok is false when no mount point matches.
func (t *mountTable) lookup(path string) (mount, bool) {
	best := -1
	for i := range t.mounts {
		mp := t.mounts[i].point
		if !within(path, mp) {
			continue
		}
		if best < 0 || len(mp) >= len(t.mounts[best].point) {
			best = i
		}
	}
	if best < 0 {
		return mount{}, false
	}
	return t.mounts[best], true
}

// within reports whether path is mp or below it.
func within(path, mp string) bool {
	if !strings.HasPrefix(path, mp) {
		return false
	}
	return len(path) == len(mp) || mp == "/" || path[len(mp)] == '/'
}
