package appio

// FileRecord is one file's (and process's) I/O over one interval with
// who did it: what the sampler's appio plugin keeps of a Record, what the
// wire carries up the tree and what the server's record store keeps.
type FileRecord struct {
	Start, End int64  // Unix nanoseconds, the client's aligned interval
	Node       string // the sampler's node; empty below the wire
	JobID      string
	PID        uint32
	UID        uint32
	Rank       int32 // -1: unknown
	Exe        string
	Path       string // "" for the library's "other files"
	MountPoint string
	FSType     string
	Counters   [NCounters]uint64
}

// Calls is the record's read, write and metadata calls.
func (r *FileRecord) Calls() uint64 {
	c := &r.Counters
	return c[Opens] + c[Closes] + c[Reads] + c[Writes] + c[Seeks] + c[Syncs] + c[Stats] + c[Mmaps] + c[MetaOther]
}

// Nanos is the record's time in read, write and metadata calls.
func (r *FileRecord) Nanos() uint64 {
	c := &r.Counters
	return c[ReadNS] + c[WriteNS] + c[MetaNS]
}
