// Package jobs is the server's job index: what Vigil knows of each Slurm
// job (who, where, when, how it ended, and the summary written at its end),
// learned from the nodes' vigil_job_running series as ticks arrive
// (tracker.go) and completed from Slurm itself (slurm.go), kept in an
// append-only log under the data directory (index.go).
package jobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// State is a job's state: Slurm's word for it, lower case, or StateEnded
// while only the nodes have said the job is gone.
type State string

// The states; Slurm's other words (preempted, deadline, ...) are kept as
// Slurm says them, lower case.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
	StateTimeout   State = "timeout"
	StateOOM       State = "oom"
	StateNodeFail  State = "node_fail"
	StateEnded     State = "ended" // seen ended on the nodes, no scheduler word yet
)

// Final says whether s is a scheduler's last word on a job.
func (s State) Final() bool {
	switch s {
	case "", StatePending, StateRunning, StateEnded, "suspended", "configuring", "completing", "requeued", "resizing", "stopped", "signaling", "stage_out":
		return false
	}
	return true
}

// Done says whether the job is over (by the nodes' or the scheduler's word).
func (s State) Done() bool { return s == StateEnded || s.Final() }

// Duration is a time.Duration that is whole seconds in JSON.
type Duration time.Duration

// MarshalJSON writes whole seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(time.Duration(d)/time.Second), 10), nil
}

// UnmarshalJSON reads seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want seconds, got %s", b)
	}
	*d = Duration(s * float64(time.Second))
	return nil
}

// Job is one job as the index knows it.
type Job struct {
	ID        string    `json:"id"` // Slurm job id as a string ("1234", array "1234_7")
	User      string    `json:"user,omitempty"`
	Account   string    `json:"account,omitempty"`
	Partition string    `json:"partition,omitempty"`
	Name      string    `json:"name,omitempty"`
	Nodes     []string  `json:"nodes,omitempty"` // node labels as Vigil knows them
	CPUs      int       `json:"cpus,omitempty"`
	MemBytes  int64     `json:"mem_bytes,omitempty"` // requested, whole job
	GPUs      int       `json:"gpus,omitempty"`
	TimeLimit Duration  `json:"time_limit,omitempty"`
	Submit    time.Time `json:"submit,omitzero"`
	Start     time.Time `json:"start,omitzero"`
	End       time.Time `json:"end,omitzero"`
	State     State     `json:"state"`
	ExitCode  int       `json:"exit_code,omitempty"`
	Summary   *Summary  `json:"summary,omitempty"` // written at job end
}

// Summary holds a job's report figures, written at its end so reports
// outlive the raw samples. All per whole job unless said.
type Summary struct {
	CPUEfficiency float64       `json:"cpu_efficiency"`      // used CPU-seconds / (allocated CPUs × elapsed), 0..1
	MemUsedPeak   int64         `json:"mem_used_peak_bytes"` // max over time of the sum over nodes
	MemEfficiency float64       `json:"mem_efficiency"`      // MemUsedPeak / MemBytes (0 if unknown)
	ReadBytes     int64         `json:"read_bytes"`
	WriteBytes    int64         `json:"write_bytes"`
	PerNode       []NodeSummary `json:"nodes"`
	Stragglers    []string      `json:"stragglers,omitempty"`
	Notes         []string      `json:"notes,omitempty"`
	// AppIO is the job's application I/O (libvigilio, vigil iofs) per file
	// system, busiest first, at most MaxAppIOFS.
	AppIO []AppIOFS `json:"app_io,omitempty"`
	// Energy and Lustre are the report's sections of those names, kept so
	// the report shows them after the raw samples expire (Energy's nodes
	// at most MaxEnergyNodes, Lustre at most MaxLustreFS).
	Energy *Energy    `json:"energy,omitempty"`
	Lustre []LustreFS `json:"lustre,omitempty"`
}

// Energy is the job's share of its nodes' energy over its run.
type Energy struct {
	// Joules is the job's share summed over its nodes; NodeJoules the
	// nodes' whole energy over the run.
	Joules     float64 `json:"joules"`
	NodeJoules float64 `json:"node_joules"`
	// Shared: on some node the job had only part of the CPUs, and that
	// node's energy is split by the job's share of them.
	Shared bool         `json:"shared"`
	Nodes  []NodeEnergy `json:"nodes"`
	// Folded counts the nodes left out of Nodes in a stored summary
	// (their energy is in the totals).
	Folded int `json:"folded,omitempty"`
	// Missing lists the job's nodes without any energy series;
	// MissingFolded counts those a stored summary left out of it.
	Missing       []string `json:"missing,omitempty"`
	MissingFolded int      `json:"missing_folded,omitempty"`
}

// MaxEnergyNodes bounds the nodes (and missing nodes) a Summary's Energy
// lists: a 10,000-node job would otherwise take ~300 kB per record.
const MaxEnergyNodes = 64

// NodeEnergy is one node's part.
type NodeEnergy struct {
	Node       string  `json:"node"`
	Joules     float64 `json:"joules"`      // the job's share
	NodeJoules float64 `json:"node_joules"` // the whole node
	// Share is the job's CPUs over the node's (1: the whole node, also
	// when the node's CPU count is not known).
	Share float64 `json:"share"`
	// Source is what measured it: "rapl" (CPU packages and DRAM),
	// "hwmon_energy" (hwmon energy counters), "hwmon_power" (hwmon power
	// meters, averaged over the run).
	Source string `json:"source"`
}

// LustreFS is what the Lustre servers counted for the job on one file
// system (the lustre plugin's lustre_job_* series from the OSTs' and
// MDTs' job_stats), summed over its targets. The servers know the job by
// the id the clients' jobid_var/jobid_name gave its requests, which the
// plugin maps to the Slurm job id (docs/lustre.md).
type LustreFS struct {
	FS         string  `json:"fs"`
	ReadBytes  float64 `json:"read_bytes"`
	WriteBytes float64 `json:"write_bytes"`
	// Reads and Writes are the read and write requests (RPCs) the OSTs
	// served for the job.
	Reads  float64 `json:"reads"`
	Writes float64 `json:"writes"`
	// MetadataOps are the MDT operations (open, close, getattr, mkdir, …),
	// OSTOps the other object operations (punch, setattr, sync, …).
	MetadataOps float64 `json:"metadata_ops"`
	OSTOps      float64 `json:"ost_ops"`
	OSTs        int     `json:"osts"`
	MDTs        int     `json:"mdts"`
}

// MaxLustreFS bounds the file systems a report and a Summary list.
const MaxLustreFS = 64

// AppIOCallOps are the operations AppIOFS.Calls counts, in its order (the
// op label of vigil_appio_calls_total).
var AppIOCallOps = [...]string{"open", "close", "read", "write", "seek", "sync", "stat", "mmap", "meta"}

// AppIOBuckets is the number of access-size buckets (appio.NBuckets).
const AppIOBuckets = 10

// MaxAppIOFS bounds the file systems a Summary keeps.
const MaxAppIOFS = 16

// AppIOFS is a job's application I/O on one file system, whole job.
type AppIOFS struct {
	Mountpoint   string                   `json:"mountpoint"`
	FSType       string                   `json:"fstype"`
	ReadBytes    int64                    `json:"read_bytes"`
	WriteBytes   int64                    `json:"write_bytes"`
	Calls        [len(AppIOCallOps)]int64 `json:"calls"`
	ReadSeconds  float64                  `json:"read_seconds"`
	WriteSeconds float64                  `json:"write_seconds"`
	MetaSeconds  float64                  `json:"meta_seconds"`
	Sequential   int64                    `json:"sequential"`
	Random       int64                    `json:"random"`
	ReadSizes    [AppIOBuckets]int64      `json:"read_sizes"` // per bucket, not cumulative
	WriteSizes   [AppIOBuckets]int64      `json:"write_sizes"`
}

// NodeSummary is one node's share of a Summary.
type NodeSummary struct {
	Node          string  `json:"node"`
	CPUEfficiency float64 `json:"cpu_efficiency"`
	MemUsedPeak   int64   `json:"mem_used_peak_bytes"`
	ReadBytes     int64   `json:"read_bytes"`
	WriteBytes    int64   `json:"write_bytes"`
}

// Filter selects jobs in List; zero fields select all.
type Filter struct {
	User      string
	State     State // also "running" / "ended": see Match
	Partition string
	// Node keeps jobs that ran on this node. The index keeps node lists on
	// disk only, so such a list reads at most MaxNodeScan candidates.
	Node string
	// Since keeps jobs that ran (or waited) at any time after it: not
	// ended before it.
	Since time.Time
	Limit int // 0: DefaultLimit
}

// List limits.
const (
	DefaultLimit = 1000
	MaxLimit     = 100000
	MaxNodeScan  = 100000
)

// Limits on what one job may hold, so a hostile source cannot grow the
// index without bound.
const (
	MaxIDLen     = 64
	MaxStringLen = 256
	MaxNodes     = 65536
	MaxNotes     = 64
)

// ValidID says whether s can be a Slurm job id: digits, optionally
// "_" and an array task id or "+" and a het component.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDLen || s[0] < '0' || s[0] > '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && c != '_' && c != '+' && c != '.' {
			return false
		}
	}
	return true
}

// clip bounds a string from an outside source.
func clip(s string) string {
	if len(s) > MaxStringLen {
		return s[:MaxStringLen]
	}
	return s
}
