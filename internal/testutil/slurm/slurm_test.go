package slurm

import (
	"strings"
	"testing"
	"time"
)

// TestCluster brings up two nodes, runs a job step on each, and checks
// that a batch job's cgroup is where Debian's Slurm puts it.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons")
	}
	c := Start(t, Options{Nodes: 2})
	for _, n := range c.Nodes {
		out := c.Run(t, "srun", "-w", n, "-N1", "-n1", "sh", "-c", "echo $SLURMD_NODENAME")
		if strings.TrimSpace(out) != n {
			t.Errorf("srun on %s printed %q", n, out)
		}
	}
	id := c.Submit(t, "-w", c.Nodes[1], "--wrap", "sleep 60")
	c.WaitJob(t, id, 10*time.Second, "RUNNING")
	if pids := c.PIDs(t, id, c.Nodes[1]); len(pids) == 0 {
		t.Errorf("scontrol listpids %s: no process", id)
	}
	t.Log(c.Run(t, "squeue"))
	t.Log(c.Run(t, "scontrol", "listpids", id, c.Nodes[1]))
}
