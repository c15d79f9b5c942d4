package procs

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Stat is the part of /proc/<pid>/stat the plugin uses. Comm points into
// the parsed data and is valid only as long as that buffer is.
type Stat struct {
	Comm      []byte
	UTime     uint64 // clock ticks
	STime     uint64 // clock ticks
	Threads   uint64
	StartTime uint64 // clock ticks after boot; tells a reused pid apart
	RSSPages  uint64
}

// Field positions counted from the state field, the first after "(comm)"
// (proc(5) numbers them 3, 14, 15, 20, 22 and 24).
const (
	fUTime     = 14 - 3
	fSTime     = 15 - 3
	fThreads   = 20 - 3
	fStartTime = 22 - 3
	fRSS       = 24 - 3
	nFields    = fRSS + 1
)

// ParseStat parses the content of /proc/<pid>/stat. It does not allocate.
func ParseStat(data []byte, st *Stat) error {
	// comm may hold blanks and parentheses: it ends at the last ')'.
	open := bytes.IndexByte(data, '(')
	end := bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return errors.New("no (comm) field")
	}
	st.Comm = data[open+1 : end]
	line, _ := kernfs.NextLine(data[end+1:])
	var f [nFields][]byte
	if n := kernfs.Fields(line, f[:]); n < nFields {
		return fmt.Errorf("want at least %d fields after comm, found %d", nFields, n)
	}
	for _, x := range []struct {
		dst *uint64
		i   int
	}{{&st.UTime, fUTime}, {&st.STime, fSTime}, {&st.StartTime, fStartTime}} {
		v, err := kernfs.ParseUint(f[x.i])
		if err != nil {
			return fmt.Errorf("field %d %q: %w", x.i+3, f[x.i], err)
		}
		*x.dst = v
	}
	// num_threads and rss are signed in the kernel (rss can be read as
	// negative for a moment); clamp at zero rather than fail.
	for _, x := range []struct {
		dst *uint64
		i   int
	}{{&st.Threads, fThreads}, {&st.RSSPages, fRSS}} {
		v, err := kernfs.ParseInt(f[x.i])
		if err != nil {
			return fmt.Errorf("field %d %q: %w", x.i+3, f[x.i], err)
		}
		*x.dst = uint64(max(v, 0))
	}
	return nil
}

// ParseUID returns the effective uid from the Uid line of /proc/<pid>/status
// ("Uid:" real effective saved filesystem), the owner ps and top show.
func ParseUID(data []byte) (uint32, error) {
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		key, rest, ok := kernfs.Cut(line, ':')
		if !ok || string(key) != "Uid" {
			continue
		}
		var f [2][]byte
		if n := kernfs.Fields(rest, f[:]); n < 2 {
			return 0, fmt.Errorf("status line %q: want 4 ids", line)
		}
		v, err := kernfs.ParseUint(f[1])
		if err != nil || v > math.MaxUint32 {
			return 0, fmt.Errorf("status line %q: effective uid %q: %w", line, f[1], kernfs.ErrSyntax)
		}
		return uint32(v), nil
	}
	return 0, errors.New("no Uid line")
}

// IO is the part of /proc/<pid>/io the plugin uses: bytes the process
// caused to be fetched from or sent to storage.
type IO struct {
	ReadBytes, WriteBytes uint64
}

// ParseIO parses the content of /proc/<pid>/io; both fields must be present.
func ParseIO(data []byte, io *IO) error {
	var seen uint8
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		key, rest, ok := kernfs.Cut(line, ':')
		if !ok {
			continue
		}
		var dst *uint64
		var bit uint8
		switch string(key) {
		case "read_bytes":
			dst, bit = &io.ReadBytes, 1
		case "write_bytes":
			dst, bit = &io.WriteBytes, 2
		default:
			continue
		}
		v, err := kernfs.ParseUint(kernfs.TrimSpace(rest))
		if err != nil {
			return fmt.Errorf("%s %q: %w", key, kernfs.TrimSpace(rest), err)
		}
		*dst = v
		seen |= bit
	}
	if seen != 3 {
		return errors.New("want read_bytes and write_bytes lines")
	}
	return nil
}

// maxUsers bounds the user-name cache; a bigger passwd file is unusual
// (sites with many users use LDAP), and the rest fall back to numbers.
const maxUsers = 1 << 16

// ParsePasswd maps uids to user names from /etc/passwd content. Lines that
// are not name:password:uid:... (comments, NIS "+" entries) are skipped: a
// name is a nicety, never worth failing the plugin for. The first entry of
// a uid wins, as getpwuid does.
func ParsePasswd(data []byte) map[uint32]string {
	users := map[uint32]string{}
	for len(data) > 0 && len(users) < maxUsers {
		var line []byte
		line, data = kernfs.NextLine(data)
		name, rest, ok := kernfs.Cut(line, ':')
		if !ok || len(name) == 0 || name[0] == '#' || name[0] == '+' || name[0] == '-' {
			continue
		}
		_, rest, ok = kernfs.Cut(rest, ':')
		if !ok {
			continue
		}
		uidField, _, ok := kernfs.Cut(rest, ':')
		if !ok {
			continue
		}
		uid, err := kernfs.ParseUint(uidField)
		if err != nil || uid > math.MaxUint32 {
			continue
		}
		if _, dup := users[uint32(uid)]; !dup {
			users[uint32(uid)] = labelValue(name)
		}
	}
	return users
}

// ParseJob returns the Slurm job id in a /proc/<pid>/cgroup, "" if the
// process is in no job: the number of a "job_<n>" path element, as in
// "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0" (v2) or
// "4:memory:/slurm_cn01/uid_1000/job_42/step_batch/task_0" (v1).
func ParseJob(data []byte) string {
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		for {
			i := bytes.Index(line, []byte("/job_"))
			if i < 0 {
				break
			}
			line = line[i+len("/job_"):]
			n := 0
			for n < len(line) && n < 10 && line[n] >= '0' && line[n] <= '9' {
				n++
			}
			if n > 0 && line[0] != '0' && (n == len(line) || line[n] == '/') {
				return string(line[:n])
			}
		}
	}
	return ""
}
