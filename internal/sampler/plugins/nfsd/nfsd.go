// Package nfsd samples the NFS server's counters from /proc/net/rpc/nfsd
// (node_exporter's nfsd collector).
package nfsd

import (
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
		Name:         "nfsd",
		Description:  "NFS server counters from /proc/net/rpc/nfsd",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &NFSd{} },
		SampleConfig: sampleConfig,
	})
}

// Procedure names (method label values) by position in the proc2 and
// proc3 lines, after the count; Null is not exported, as upstream.
var (
	V2 = [...]string{"Null", "GetAttr", "SetAttr", "Root", "Lookup", "ReadLink", "Read", "WrCache", "Write",
		"Create", "Remove", "Rename", "Link", "SymLink", "MkDir", "RmDir", "ReadDir", "FsStat"}
	V3 = [...]string{"Null", "GetAttr", "SetAttr", "Lookup", "Access", "ReadLink", "Read", "Write", "Create",
		"MkDir", "SymLink", "MkNod", "Remove", "RmDir", "Rename", "Link", "ReadDir", "ReadDirPlus", "FsStat",
		"FsInfo", "PathConf", "Commit"}
)

// V4Ops are the NFSv4 operations exported, by the kernel's operation
// number (the position in proc4ops after the count). Operations 0-2 are
// unused and 23/24 (PUTPUBFH, PUTROOTFH) are not exported, as upstream.
var V4Ops = [...]struct {
	Op   int
	Name string
}{
	{3, "Access"}, {4, "Close"}, {5, "Commit"}, {6, "Create"}, {7, "DelegPurge"}, {8, "DelegReturn"},
	{9, "GetAttr"}, {10, "GetFH"}, {11, "Link"}, {12, "Lock"}, {13, "Lockt"}, {14, "Locku"}, {15, "Lookup"},
	{16, "LookupRoot"}, {17, "Nverify"}, {18, "Open"}, {19, "OpenAttr"}, {20, "OpenConfirm"}, {21, "OpenDgrd"},
	{22, "PutFH"}, {25, "Read"}, {26, "ReadDir"}, {27, "ReadLink"}, {28, "Remove"}, {29, "Rename"},
	{30, "Renew"}, {31, "RestoreFH"}, {32, "SaveFH"}, {33, "SecInfo"}, {34, "SetAttr"}, {35, "SetClientID"},
	{36, "SetClientIDConfirm"}, {37, "Verify"}, {38, "Write"}, {39, "RelLockOwner"},
}

// Stats is one read of the file; a line the kernel does not write reads
// as zeros, as in node_exporter.
type Stats struct {
	RC        [3]uint64 // hits, misses, nocache
	FH        [5]uint64 // stale, ...
	IO        [2]uint64 // read, write bytes
	TH        [2]uint64 // threads, fullcnt
	RA        [12]uint64
	Net       [4]uint64 // net, udp, tcp, tcpconn
	RPC       [5]uint64 // count, bad, badfmt, badauth, badclnt
	V2        [len(V2)]uint64
	V3        [len(V3)]uint64
	V4Ops     [40]uint64 // by operation number
	WdelegGet uint64
}

type desc = *metric.Desc

// NFSd is the nfsd plugin.
type NFSd struct {
	file                                  *kernfs.File
	hits, misses, nocache, stale          desc
	read, written, threads, raSize, raNF  desc
	udp, tcp, conns, badFmt, badAuth, bcl desc
	rpcs, wdeleg                          desc
	v2, v3                                []desc
	v4                                    []desc
	stats                                 Stats
	tick                                  uint64
	absent                                bool
}

// retryAbsentEvery ticks a missing file is looked for again (nfsd loads
// when the server starts).
const retryAbsentEvery = 64

// Init resolves the file and makes every descriptor.
func (n *NFSd) Init(env sampler.Env) error {
	n.file = kernfs.NewFile(env.FS.Path("proc", "net", "rpc", "nfsd"), 2048)
	n.file.NonBlocking = true
	c := func(name, help string, kv ...string) desc {
		return metric.NewDesc("node_nfsd_"+name, help, metric.Counter, kv...)
	}
	n.hits = c("reply_cache_hits_total", "Total number of NFSd Reply Cache hits (client lost server response).")
	n.misses = c("reply_cache_misses_total", "Total number of NFSd Reply Cache an operation that requires caching (idempotent).")
	n.nocache = c("reply_cache_nocache_total", "Total number of NFSd Reply Cache non-idempotent operations (rename/delete/…).")
	n.stale = c("file_handles_stale_total", "Total number of NFSd stale file handles")
	n.read = c("disk_bytes_read_total", "Total NFSd bytes read.")
	n.written = c("disk_bytes_written_total", "Total NFSd bytes written.")
	n.threads = metric.NewDesc("node_nfsd_server_threads", "Total number of NFSd kernel threads that are running.", metric.Gauge)
	n.raSize = metric.NewDesc("node_nfsd_read_ahead_cache_size_blocks", "How large the read ahead cache is in blocks.", metric.Gauge)
	n.raNF = c("read_ahead_cache_not_found_total", "Total number of NFSd read ahead cache not found.")
	const packets = "Total NFSd network packets (sent+received) by protocol type."
	n.udp = c("packets_total", packets, "proto", "udp")
	n.tcp = c("packets_total", packets, "proto", "tcp")
	n.conns = c("connections_total", "Total number of NFSd TCP connections.")
	const errs = "Total number of NFSd RPC errors by error type."
	n.badFmt = c("rpc_errors_total", errs, "error", "fmt")
	n.badAuth = c("rpc_errors_total", errs, "error", "auth")
	n.bcl = c("rpc_errors_total", errs, "error", "cInt")
	n.rpcs = c("server_rpcs_total", "Total number of NFSd RPCs.")
	const reqs = "Total number NFSd Requests by method and protocol."
	for _, m := range V2[1:] {
		n.v2 = append(n.v2, c("requests_total", reqs, "proto", "2", "method", m))
	}
	for _, m := range V3[1:] {
		n.v3 = append(n.v3, c("requests_total", reqs, "proto", "3", "method", m))
	}
	for _, o := range V4Ops {
		n.v4 = append(n.v4, c("requests_total", reqs, "proto", "4", "method", o.Name))
	}
	n.wdeleg = c("requests_total", reqs, "proto", "4", "method", "WdelegGetattr")
	return nil
}

// Sample reads the file; without the nfsd module it is "not available".
func (n *NFSd) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	n.tick++
	if n.absent && n.tick%retryAbsentEvery != 0 {
		return sampler.ErrNotAvailable
	}
	data, err := n.file.Read()
	if n.absent = errors.Is(err, fs.ErrNotExist); n.absent {
		return sampler.ErrNotAvailable
	}
	if err != nil {
		return err
	}
	if err := Parse(data, &n.stats); err != nil {
		return fmt.Errorf("%s: %w", n.file.Path(), err)
	}
	s := &n.stats
	b.Add(n.hits, float64(s.RC[0]))
	b.Add(n.misses, float64(s.RC[1]))
	b.Add(n.nocache, float64(s.RC[2]))
	b.Add(n.stale, float64(s.FH[0]))
	b.Add(n.read, float64(s.IO[0]))
	b.Add(n.written, float64(s.IO[1]))
	b.Add(n.threads, float64(s.TH[0]))
	b.Add(n.raSize, float64(s.RA[0]))
	b.Add(n.raNF, float64(s.RA[11]))
	b.Add(n.udp, float64(s.Net[1]))
	b.Add(n.tcp, float64(s.Net[2]))
	b.Add(n.conns, float64(s.Net[3]))
	b.Add(n.badFmt, float64(s.RPC[2]))
	b.Add(n.badAuth, float64(s.RPC[3]))
	b.Add(n.bcl, float64(s.RPC[4]))
	b.Add(n.rpcs, float64(s.RPC[0]))
	for i, d := range n.v2 {
		b.Add(d, float64(s.V2[i+1]))
	}
	for i, d := range n.v3 {
		b.Add(d, float64(s.V3[i+1]))
	}
	for i, d := range n.v4 {
		b.Add(d, float64(s.V4Ops[V4Ops[i].Op]))
	}
	b.Add(n.wdeleg, float64(s.WdelegGet))
	return nil
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

// Parse fills s from /proc/net/rpc/nfsd content with procfs's rules: every
// value an unsigned integer (only the first two of "th", whose others were
// floats on old kernels), fixed counts for rc, fh, io, ra, net and rpc, and
// "procN count v1 … vcount" with at least 18 (v2), 22 (v3) or 39 (v4ops)
// values and exactly 2 for proc4. Lines of unknown kinds are skipped
// (procfs fails on them; kernels add lines).
func Parse(data []byte, s *Stats) error {
	*s = Stats{}
	var vals [128]uint64
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		key, rest := kernfs.NextField(line)
		if len(key) == 0 {
			continue
		}
		limit := len(vals)
		if string(key) == "th" {
			limit = 2
		}
		k := 0
		for k < limit {
			var f []byte
			f, rest = kernfs.NextField(rest)
			if len(f) == 0 {
				break
			}
			v, err := kernfs.ParseUint(f)
			if err != nil {
				return fmt.Errorf("line %d (%s): value %q: %w", n, key, clip(f), ErrFormat)
			}
			vals[k] = v
			k++
		}
		if f, _ := kernfs.NextField(rest); len(f) > 0 && limit == len(vals) {
			return fmt.Errorf("line %d (%s): more than %d values: %w", n, key, len(vals), ErrFormat)
		}
		v := vals[:k]
		var err error
		switch string(key) {
		case "rc":
			err = fixed(s.RC[:], v)
		case "fh":
			err = fixed(s.FH[:], v)
		case "io":
			err = fixed(s.IO[:], v)
		case "th":
			err = fixed(s.TH[:], v)
		case "ra":
			err = fixed(s.RA[:], v)
		case "net":
			err = fixed(s.Net[:], v)
		case "rpc":
			err = fixed(s.RPC[:], v)
		case "proc2":
			err = counted(s.V2[:], v, len(V2), false)
		case "proc3":
			err = counted(s.V3[:], v, len(V3), false)
		case "proc4":
			var p4 [2]uint64
			err = counted(p4[:], v, 2, true)
		case "proc4ops":
			err = counted(s.V4Ops[:], v, 39, false)
		case "wdeleg_getattr":
			if len(v) < 1 {
				err = ErrFormat
			} else {
				s.WdelegGet = v[0]
			}
		}
		if err != nil {
			return fmt.Errorf("line %d (%s): %w", n, key, err)
		}
	}
	return nil
}

func fixed(dst, v []uint64) error {
	if len(v) != len(dst) {
		return fmt.Errorf("%d values, want %d: %w", len(v), len(dst), ErrFormat)
	}
	copy(dst, v)
	return nil
}

// counted checks "count v1 … vcount" with count at least min (exactly
// min when exact) and keeps the values that fit dst.
func counted(dst, v []uint64, min int, exact bool) error {
	if len(v) == 0 || uint64(len(v)-1) != v[0] || len(v)-1 < min || exact && len(v)-1 != min {
		return fmt.Errorf("count and values do not agree (want %d values): %w", min, ErrFormat)
	}
	copy(dst, v[1:])
	return nil
}

func clip(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}
