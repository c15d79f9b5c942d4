// Package jobs holds Vigil's record of Slurm jobs.
//
// This file carries the shared types of the issue 14 contract so that
// internal/jobs/report builds on its own branch; the job index's branch
// defines the same types and is the one kept at merge.
package jobs

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// State is a job's state as Slurm words it, or "ended" when the nodes saw
// the job end but the scheduler has not said how yet.
type State string

// The job states.
const (
	Pending   State = "pending"
	Running   State = "running"
	Completed State = "completed"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	Timeout   State = "timeout"
	OOM       State = "oom"
	NodeFail  State = "node_fail"
	Ended     State = "ended"
)

// Duration is a time.Duration that is whole seconds in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as seconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Seconds())
}

// UnmarshalJSON reads seconds (a JSON number).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want seconds as a number: %w", err)
	}
	if math.IsNaN(s) || s < 0 || s > float64(math.MaxInt64)/1e9 {
		return fmt.Errorf("duration: %v seconds is out of range", s)
	}
	*d = Duration(time.Duration(s * 1e9))
	return nil
}

// Job is one Slurm job as the index knows it.
type Job struct {
	ID        string    `json:"id"` // Slurm job id ("1234", array "1234_7")
	User      string    `json:"user,omitempty"`
	Account   string    `json:"account,omitempty"`
	Partition string    `json:"partition,omitempty"`
	Name      string    `json:"name,omitempty"`
	Nodes     []string  `json:"nodes,omitempty"` // the node label of each host
	CPUs      int       `json:"cpus,omitempty"`
	MemBytes  int64     `json:"mem_bytes,omitempty"` // requested, whole job
	GPUs      int       `json:"gpus,omitempty"`
	TimeLimit Duration  `json:"time_limit,omitempty"`
	Submit    time.Time `json:"submit,omitempty"` // zero if unknown
	Start     time.Time `json:"start,omitempty"`
	End       time.Time `json:"end,omitempty"`
	State     State     `json:"state"`
	ExitCode  int       `json:"exit_code,omitempty"`
	Summary   *Summary  `json:"summary,omitempty"` // written at job end
}

// Summary is the figures of a job's report, kept after the raw samples
// expire. All figures are for the whole job unless said.
type Summary struct {
	CPUEfficiency float64       `json:"cpu_efficiency"`      // used CPU-seconds / (allocated CPUs × elapsed)
	MemUsedPeak   int64         `json:"mem_used_peak_bytes"` // max over time of the sum over nodes
	MemEfficiency float64       `json:"mem_efficiency"`      // MemUsedPeak / MemBytes (0 if unknown)
	ReadBytes     int64         `json:"read_bytes"`
	WriteBytes    int64         `json:"write_bytes"`
	PerNode       []NodeSummary `json:"nodes"`
	Stragglers    []string      `json:"stragglers,omitempty"`
	Notes         []string      `json:"notes,omitempty"`
}

// NodeSummary is one node's share of a Summary.
type NodeSummary struct {
	Node          string  `json:"node"`
	CPUEfficiency float64 `json:"cpu_efficiency"`
	MemUsedPeak   int64   `json:"mem_used_peak_bytes"`
	ReadBytes     int64   `json:"read_bytes"`
	WriteBytes    int64   `json:"write_bytes"`
}
