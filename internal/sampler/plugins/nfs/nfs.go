// Package nfs samples the NFS client's RPC counters from /proc/net/rpc/nfs
// (node_exporter's nfs collector).
package nfs

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
		Name:         "nfs",
		Description:  "NFS client RPC counters from /proc/net/rpc/nfs",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &NFS{} },
		SampleConfig: sampleConfig,
	})
}

// Procedure names by NFS version, in the order of the kernel's procN
// lines; they are node_exporter's method label values.
var (
	V2 = []string{"Null", "GetAttr", "SetAttr", "Root", "Lookup", "ReadLink", "Read", "WrCache", "Write",
		"Create", "Remove", "Rename", "Link", "SymLink", "MkDir", "RmDir", "ReadDir", "FsStat"}
	V3 = []string{"Null", "GetAttr", "SetAttr", "Lookup", "Access", "ReadLink", "Read", "Write", "Create",
		"MkDir", "SymLink", "MkNod", "Remove", "RmDir", "Rename", "Link", "ReadDir", "ReadDirPlus", "FsStat",
		"FsInfo", "PathConf", "Commit"}
	V4 = []string{"Null", "Read", "Write", "Commit", "Open", "OpenConfirm", "OpenNoattr", "OpenDowngrade",
		"Close", "Setattr", "FsInfo", "Renew", "SetClientID", "SetClientIDConfirm", "Lock", "Lockt", "Locku",
		"Access", "Getattr", "Lookup", "LookupRoot", "Remove", "Rename", "Link", "Symlink", "Create",
		"Pathconf", "StatFs", "ReadLink", "ReadDir", "ServerCaps", "DelegReturn", "GetACL", "SetACL",
		"FsLocations", "ReleaseLockowner", "Secinfo", "FsidPresent", "ExchangeID", "CreateSession",
		"DestroySession", "Sequence", "GetLeaseTime", "ReclaimComplete", "LayoutGet", "GetDeviceInfo",
		"LayoutCommit", "LayoutReturn", "SecinfoNoName", "TestStateID", "FreeStateID", "GetDeviceList",
		"BindConnToSession", "DestroyClientID", "Seek", "Allocate", "DeAllocate", "LayoutStats", "Clone"}
)

// Stats is one read of the file. A version the kernel does not list reads
// as zeros, as in node_exporter.
type Stats struct {
	UDP, TCP, TCPConnect               uint64 // "net" line
	RPCs, Retransmissions, AuthRefresh uint64 // "rpc" line
	V2                                 [18]uint64
	V3                                 [22]uint64
	V4                                 [59]uint64
}

// NFS is the nfs plugin.
type NFS struct {
	file                                 *kernfs.File
	udp, tcp, conns, rpcs, retrans, auth *metric.Desc
	v2, v3, v4                           []*metric.Desc
	stats                                Stats
	tick                                 uint64
	absent                               bool // no NFS client module at the last look
}

// retryAbsentEvery ticks a missing file is looked for again: the NFS
// client module loads with the first mount, which may come after start-up.
const retryAbsentEvery = 64

// Init resolves the file and makes every descriptor.
func (n *NFS) Init(env sampler.Env) error {
	n.file = kernfs.NewFile(env.FS.Path("proc", "net", "rpc", "nfs"), 1024)
	n.file.NonBlocking = true
	const packets = "Total NFSd network packets (sent+received) by protocol type."
	n.udp = metric.NewDesc("node_nfs_packets_total", packets, metric.Counter, "protocol", "udp")
	n.tcp = metric.NewDesc("node_nfs_packets_total", packets, metric.Counter, "protocol", "tcp")
	n.conns = metric.NewDesc("node_nfs_connections_total", "Total number of NFSd TCP connections.", metric.Counter)
	n.rpcs = metric.NewDesc("node_nfs_rpcs_total", "Total number of RPCs performed.", metric.Counter)
	n.retrans = metric.NewDesc("node_nfs_rpc_retransmissions_total", "Number of RPC transmissions performed.", metric.Counter)
	n.auth = metric.NewDesc("node_nfs_rpc_authentication_refreshes_total", "Number of RPC authentication refreshes performed.", metric.Counter)
	procs := func(proto string, names []string) []*metric.Desc {
		ds := make([]*metric.Desc, len(names))
		for i, m := range names {
			ds[i] = metric.NewDesc("node_nfs_requests_total", "Number of NFS procedures invoked.", metric.Counter, "proto", proto, "method", m)
		}
		return ds
	}
	n.v2, n.v3, n.v4 = procs("2", V2), procs("3", V3), procs("4", V4)
	return nil
}

// Sample reads the file; without the NFS client module there is none and
// the plugin is "not available".
func (n *NFS) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
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
	b.Add(n.udp, float64(s.UDP))
	b.Add(n.tcp, float64(s.TCP))
	b.Add(n.conns, float64(s.TCPConnect))
	b.Add(n.rpcs, float64(s.RPCs))
	b.Add(n.retrans, float64(s.Retransmissions))
	b.Add(n.auth, float64(s.AuthRefresh))
	for i, d := range n.v2 {
		b.Add(d, float64(s.V2[i]))
	}
	for i, d := range n.v3 {
		b.Add(d, float64(s.V3[i]))
	}
	for i, d := range n.v4 {
		b.Add(d, float64(s.V4[i]))
	}
	return nil
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

// maxValues bounds a line (proc4 has about 70 on a 6.x kernel).
const maxValues = 256

// Parse reads /proc/net/rpc/nfs content into s. A procN line gives its
// count first; counts beyond the known procedures are ignored, missing ones
// read 0 (an older kernel), as procfs does for node_exporter.
func Parse(data []byte, s *Stats) error {
	*s = Stats{}
	var f [maxValues + 2][]byte
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		k := kernfs.Fields(line, f[:])
		if k == 0 {
			continue
		}
		if k > maxValues+1 {
			return fmt.Errorf("line %d: more than %d values: %w", n, maxValues, ErrFormat)
		}
		var v [maxValues + 1]uint64
		for i := 1; i < k; i++ {
			x, err := kernfs.ParseUint(f[i])
			if err != nil {
				return fmt.Errorf("line %d field %d: want an integer: %w", n, i+1, ErrFormat)
			}
			v[i-1] = x
		}
		vals := v[:k-1]
		var dst []uint64
		switch string(f[0]) {
		case "net":
			if len(vals) != 4 {
				return fmt.Errorf("line %d: net has %d values, want 4: %w", n, len(vals), ErrFormat)
			}
			s.UDP, s.TCP, s.TCPConnect = vals[1], vals[2], vals[3]
			continue
		case "rpc":
			if len(vals) != 3 {
				return fmt.Errorf("line %d: rpc has %d values, want 3: %w", n, len(vals), ErrFormat)
			}
			s.RPCs, s.Retransmissions, s.AuthRefresh = vals[0], vals[1], vals[2]
			continue
		case "proc2":
			dst = s.V2[:]
		case "proc3":
			dst = s.V3[:]
		case "proc4":
			dst = s.V4[:]
		default:
			continue // a line a newer kernel adds
		}
		if len(vals) == 0 || vals[0] != uint64(len(vals)-1) {
			return fmt.Errorf("line %d: %s count does not match its values: %w", n, f[0], ErrFormat)
		}
		copy(dst, vals[1:])
	}
	return nil
}
