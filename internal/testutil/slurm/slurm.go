// Package slurm brings up a real Slurm cluster for a test: munged,
// slurmctld and one slurmd per node (Debian's slurm-wlm is built with
// --enable-multiple-slurmd, so several nodes run on one host), all on
// loopback ports of their own, with every file in the test's temporary
// directory, and stops it at cleanup.
//
//	c := slurm.Start(t, slurm.Options{Nodes: 2})
//	id := c.Submit(t, "-w", c.Nodes[0], "--wrap", "sleep 30")
//	out := c.Run(t, "squeue", "-h")
//
// Clients run through c.Command (SLURM_CONF points at the test's
// slurm.conf; the munge socket is named there as AuthInfo). Jobs run as
// root with proctrack/cgroup, task/cgroup (ConstrainCores,
// ConstrainRAMSpace) and jobacct_gather/cgroup on the cgroup v1 hierarchy,
// so a job's cgroups are /sys/fs/cgroup/<ctrl>/slurm_<node>/uid_0/job_<id>
// (Debian's naming). Node names are unique to the test process, so the
// cgroup roots are the test's own; cleanup cancels the jobs, kills what is
// left in those cgroups, stops the daemons (process groups) and removes
// the cgroup directories. A test process that dies without its cleanups
// leaves them to the next Start, which sweeps clusters whose owner is gone.
//
// Start skips the test unless it runs as root on a cgroup v1 (or hybrid)
// host: Slurm 22.05's cgroup/v2 asks systemd for a scope, and these test
// machines have no systemd. Missing binaries are a missing peer
// (testutil.LookPeer): a skip, or a failure with VIGIL_REQUIRE_E2E=1.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// CgroupRoot is where the cgroup v1 controllers are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// controllers are those Slurm makes job directories in with this
// configuration (freezer: proctrack; the rest: task and jobacct_gather).
var controllers = []string{"freezer", "memory", "cpuset", "cpuacct", "devices"}

const hint = "apt-get install -y slurm-wlm munge"

// dirPrefix names the clusters' directories in os.TempDir(); ownerFile in
// each says which test process made it.
const (
	dirPrefix = "vslurm"
	ownerFile = "owner"
)

// Options shape the cluster.
type Options struct {
	Nodes     int // slurmd daemons (default 1)
	MemoryMiB int // RealMemory of each node (default 2048)
	// Contain sets PrologFlags=Contain: every job gets an extern step
	// (step_extern, holding a sleep of Slurm's), as sites using
	// pam_slurm_adopt run.
	Contain bool
}

// Cluster is a running test cluster.
type Cluster struct {
	Dir   string   // everything the cluster writes
	Conf  string   // slurm.conf
	Nodes []string // NodeNames, one slurmd each
	env   []string
	bin   map[string]string
	procs []*exec.Cmd
}

// Start brings the cluster up and waits (bounded) until every node is
// idle. Everything is stopped and removed when t ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("a real Slurm needs root on Linux")
	}
	if _, err := os.Stat(filepath.Join(CgroupRoot, "freezer", "cgroup.procs")); err != nil {
		t.Skip("a real Slurm without systemd needs the cgroup v1 hierarchy (no freezer controller here)")
	}
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.MemoryMiB <= 0 {
		o.MemoryMiB = 2048
	}
	c := &Cluster{bin: map[string]string{}}
	for _, name := range []string{"munged", "mungekey", "slurmctld", "slurmd", "slurmstepd", "sbatch", "squeue", "scancel", "scontrol", "sinfo", "srun"} {
		c.bin[name] = lookPeer(t, name)
	}
	sweep(t)
	// Short private directory: munged's socket path must fit sun_path.
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	c.Dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	writeFile(t, filepath.Join(dir, ownerFile), selfID())
	// Daemons check that the directories leading to their key and socket
	// are not writable by others; 0711 lets job users reach the socket.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ctld", "spool", "log", "run", "jobs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	// Node names from the directory's random suffix: the cgroup roots
	// slurm_<node> are then this cluster's only, even with clusters in
	// parallel or a crashed run's leftovers.
	prefix := "v" + strings.TrimPrefix(filepath.Base(dir), dirPrefix) + "n"
	for i := 1; i <= o.Nodes; i++ {
		c.Nodes = append(c.Nodes, prefix+strconv.Itoa(i))
	}
	ports := freePorts(t, 1+o.Nodes)
	munge := filepath.Join(dir, "munge.sock")
	c.Conf = filepath.Join(dir, "slurm.conf")
	c.env = append(cleanEnv(), "SLURM_CONF="+c.Conf)

	var conf bytes.Buffer
	fmt.Fprintf(&conf, `ClusterName=vigiltest
SlurmctldHost=%s(127.0.0.1)
SlurmctldPort=%d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket=%s
MpiDefault=none
SwitchType=switch/none
StateSaveLocation=%s/ctld
SlurmdSpoolDir=%s/spool/%%n
SlurmctldPidFile=%s/run/slurmctld.pid
SlurmdPidFile=%s/run/slurmd.%%n.pid
SlurmctldLogFile=%s/log/slurmctld.log
SlurmdLogFile=%s/log/slurmd.%%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=task=10
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
KillWait=2
MinJobAge=10
MailProg=/bin/true
`, host, ports[0], munge, dir, dir, dir, dir, dir, dir)
	cpus := runtime.NumCPU()
	for i, n := range c.Nodes {
		// Every node claims the host's CPUs: the nodes share them.
		fmt.Fprintf(&conf, "NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=%d State=UNKNOWN\n",
			n, host, ports[1+i], cpus, o.MemoryMiB)
	}
	fmt.Fprintf(&conf, "PartitionName=test Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", strings.Join(c.Nodes, ","))
	if o.Contain {
		conf.WriteString("PrologFlags=Contain\n")
	}
	writeFile(t, c.Conf, conf.String())
	writeFile(t, filepath.Join(dir, "cgroup.conf"), `CgroupPlugin=cgroup/v1
CgroupMountpoint=`+CgroupRoot+`
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainDevices=no
`)
	for _, n := range c.Nodes {
		if err := os.Mkdir(filepath.Join(dir, "spool", n), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// Registered before the daemons start, so it runs after their own
	// stop (cleanups run last-in first-out): cgroups go once nothing is
	// left in them.
	t.Cleanup(func() { c.removeCgroups(t) })
	// And after the daemons' stop: a slurmstepd still starting or ending
	// is no longer in a cgroup, but it carries the cluster's SLURM_CONF.
	t.Cleanup(func() { c.reap(t, 5*time.Second) })

	key := filepath.Join(dir, "munge.key")
	if out, err := exec.Command(c.bin["mungekey"], "--create", "--keyfile="+key).CombinedOutput(); err != nil {
		t.Fatalf("mungekey: %v: %s", err, out)
	}
	c.daemon(t, "munged", c.bin["munged"], "--foreground", "--force", "--socket="+munge, "--key-file="+key,
		"--pid-file="+filepath.Join(dir, "run", "munged.pid"), "--seed-file="+filepath.Join(dir, "munged.seed"),
		"--log-file="+filepath.Join(dir, "log", "munged.log"))
	c.waitFile(t, munge, "munged's socket", 10*time.Second)
	c.daemon(t, "slurmctld", c.bin["slurmctld"], "-D", "-i", "-f", c.Conf)
	for _, n := range c.Nodes {
		c.daemon(t, "slurmd."+n, c.bin["slurmd"], "-D", "-f", c.Conf, "-N", n)
	}
	// Jobs first, daemons after: cleanups run in reverse order.
	t.Cleanup(func() { c.cancelAll(t) })
	c.waitIdle(t, 40*time.Second)
	return c
}

// Command returns a Slurm client command (sbatch, squeue, ...) that talks
// to this cluster.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	p := c.bin[name]
	if p == "" {
		p = name
	}
	cmd := exec.CommandContext(ctx, p, args...)
	cmd.Env = c.env
	cmd.Dir = c.Dir
	return cmd
}

// Env is the environment that points Slurm's clients at this cluster
// (the test's own, SLURM_* variables removed, SLURM_CONF set).
func (c *Cluster) Env() []string { return slices.Clone(c.env) }

// Run runs a client command with a 20 s bound and returns its standard
// output; a failure fails the test.
func (c *Cluster) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := c.try(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

func (c *Cluster) try(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	cmd := c.Command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(e.String()))
	}
	return o.String(), nil
}

// Submit runs sbatch --parsable with args and returns the job id.
func (c *Cluster) Submit(t testing.TB, args ...string) string {
	t.Helper()
	out := c.Run(t, "sbatch", append([]string{"--parsable", "-o", filepath.Join(c.Dir, "jobs", "%j.out")}, args...)...)
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		t.Fatalf("sbatch printed %q, want a job id", out)
	}
	return id
}

// JobState returns the job's state as squeue prints it (RUNNING,
// PENDING, COMPLETED, ...), or "" once Slurm has forgotten the job.
func (c *Cluster) JobState(t testing.TB, id string) string {
	t.Helper()
	out, err := c.try("squeue", "-h", "-t", "all", "-j", id, "-o", "%T")
	if err != nil && strings.Contains(err.Error(), "Invalid job id") {
		return ""
	}
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	return strings.TrimSpace(out)
}

// WaitJob polls (every 50 ms, up to within) until the job's state is one
// of states, and returns it.
func (c *Cluster) WaitJob(t testing.TB, id string, within time.Duration, states ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := c.JobState(t, id)
		for _, w := range states {
			if s == w {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %q after %v, want one of %v; slurmctld log:\n%s", id, s, within, states, c.Log("slurmctld"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PIDs returns the job's processes on node, as Slurm's own `scontrol
// listpids` reports them, slurmstepd not included. It waits (5 s) for the
// first: Slurm says RUNNING before the node's slurmstepd has started the
// job, and lists pid -1 until then.
func (c *Cluster) PIDs(t testing.TB, id, node string) []int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := c.try("scontrol", "listpids", id, node)
		var pids []int
		for _, line := range strings.Split(out, "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			pid, err := strconv.Atoi(f[0])
			if err != nil || pid <= 0 {
				continue
			}
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.HasPrefix(string(comm), "slurmstepd") {
				continue
			}
			pids = append(pids, pid)
		}
		if len(pids) > 0 {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("scontrol listpids %s %s: no process after 5 s (%v): %s", id, node, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log returns the end of a daemon's log (slurmctld, slurmd.<node>, munged).
func (c *Cluster) Log(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "log", name+".log"))
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// daemon starts a daemon in the foreground in a process group of its own,
// stopped at cleanup: SIGTERM to the group, SIGKILL after 10 s.
func (c *Cluster) daemon(t testing.TB, name, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = c.env
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(c.Dir, "log", name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(done) }()
	c.procs = append(c.procs, cmd)
	t.Cleanup(func() {
		pg := cmd.Process.Pid
		syscall.Kill(-pg, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Logf("%s did not stop in 10 s: killed", name)
			syscall.Kill(-pg, syscall.SIGKILL)
			<-done
		}
		// Anything the daemon left in its group.
		syscall.Kill(-pg, syscall.SIGKILL)
	})
}

func (c *Cluster) waitFile(t testing.TB, path, what string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitIdle polls sinfo until every node is idle.
func (c *Cluster) waitIdle(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		out, err := c.try("sinfo", "-h", "-N", "-o", "%N %T")
		if err == nil {
			idle := 0
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
					idle++
				}
			}
			if idle == len(c.Nodes) {
				return
			}
			last = out
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, n := range c.Nodes {
				fmt.Fprintf(&logs, "--- slurmd.%s\n%s", n, c.Log("slurmd."+n))
			}
			t.Fatalf("nodes not idle after %v: %s\n--- slurmctld\n%s%s", within, last, c.Log("slurmctld"), logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cancelAll cancels every job and waits (10 s) until no process is left
// in the cluster's job cgroups; what is still there is killed.
func (c *Cluster) cancelAll(t testing.TB) {
	c.try("scancel", "--full", "-p", "test")
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := c.cgroupPIDs()
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("killing %d processes left in the job cgroups", len(pids))
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reap waits (up to wait) for the processes whose environment names this
// cluster's slurm.conf to exit, then kills them.
func (c *Cluster) reap(t testing.TB, wait time.Duration) {
	mark := []byte("SLURM_CONF=" + c.Conf + "\x00")
	deadline := time.Now().Add(wait)
	for {
		var pids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			if env, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && bytes.Contains(env, mark) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("killing %d leftover processes of the cluster", len(pids))
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupPIDs lists the processes in the cluster's freezer cgroups (where
// proctrack/cgroup puts every job process and slurmstepd).
func (c *Cluster) cgroupPIDs() []int {
	var pids []int
	for _, n := range c.Nodes {
		filepath.WalkDir(filepath.Join(CgroupRoot, "freezer", "slurm_"+n), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the slurm_<node> trees, deepest first, retrying
// for 5 s while the kernel still holds exiting processes.
func (c *Cluster) removeCgroups(t testing.TB) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for _, ctrl := range controllers {
			for _, n := range c.Nodes {
				root := filepath.Join(CgroupRoot, ctrl, "slurm_"+n)
				var dirs []string
				filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
					if err == nil && d.IsDir() {
						dirs = append(dirs, p)
					}
					return nil
				})
				for i := len(dirs) - 1; i >= 0; i-- {
					if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
						left = append(left, dirs[i])
					}
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cgroups left behind: %v", left)
			return
		}
		for _, p := range c.cgroupPIDs() {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lookPeer(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(d, name); isExec(p) {
			return p
		}
	}
	return testutil.LookPeer(t, name, hint)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// cleanEnv is the test's environment without SLURM_* variables, which
// would otherwise point the clients at another cluster.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "MUNGE_") {
			env = append(env, kv)
		}
	}
	return env
}

// freePorts returns n loopback TCP ports free at the time of the call.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

func writeFile(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// selfID identifies this process across pid reuse: pid and start time.
func selfID() string { return procID(os.Getpid()) }

func procID(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" { // a zombie is dead
		return ""
	}
	return strconv.Itoa(pid) + " " + f[19] // field 22, starttime
}

// sweep stops what a test process that died without its cleanups (a `go
// test -timeout` panic, SIGKILL) left: for each cluster directory whose
// owner is gone, its processes, job cgroups and files.
func sweep(t testing.TB) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being made
		}
		pid, _, _ := strings.Cut(string(owner), " ")
		if n, err := strconv.Atoi(pid); err != nil || procID(n) == string(owner) {
			continue
		}
		c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf")}
		conf, _ := os.ReadFile(c.Conf)
		for _, line := range strings.Split(string(conf), "\n") {
			if rest, ok := strings.CutPrefix(line, "NodeName="); ok {
				name, _, _ := strings.Cut(rest, " ")
				c.Nodes = append(c.Nodes, name)
			}
		}
		t.Logf("removing the Slurm test cluster %s left by process %s", dir, pid)
		c.reap(t, 0)
		c.removeCgroups(t)
		os.RemoveAll(dir)
	}
}
