package kernfs

// DirEntry is one entry of a directory listing; Name points into the
// Dir's buffer and is valid until the next List.
type DirEntry struct {
	Name []byte
	Type uint8 // DT_* as getdents reports it: DTDir, DTLink, DTReg or DTUnknown
}

// Entry types, as in <dirent.h>.
const (
	DTUnknown = 0
	DTDir     = 4
	DTReg     = 8
	DTLink    = 10
)

// maxDirBytes bounds a listing (a /sys/class/net with thousands of veths
// is ~100 KiB).
const maxDirBytes = 16 << 20

// Dir lists a directory (such as /sys/class/net) kept open and re-read from
// its start on every List, into buffers it owns: once they have grown, a
// listing allocates nothing, where os.ReadDir allocates per entry.
type Dir struct {
	// NonBlocking: the caller vouches that listing this directory never
	// waits (our own /proc/self/fd, a sysfs class directory). On procfs or
	// sysfs it is then read with syscalls the Go runtime does not see: a
	// syscall it sees wakes its monitor thread from its deep sleep, which
	// then polls every 20 µs for the rest of the tick, two to three
	// wake-ups a tick on an otherwise idle sampler.
	NonBlocking bool

	path string
	fd   int // -1: not open
	raw  bool
	buf  []byte
	ents []DirEntry
}

// NewDir returns a Dir for path; nothing is opened until the first List.
func NewDir(path string) *Dir { return &Dir{path: path, fd: -1} }

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }
