package jobs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxDepth bounds the walk below a job directory: step_<s>/user/task_<t>
// is three levels (v2), step_<s>/task_<t> two (v1).
const maxDepth = 3

// maxLeaves bounds the directories whose processes are counted per job.
const maxLeaves = 512

// scan walks the job's tree for the directories holding its processes
// and re-reads its memory limit and cpuset, which Slurm sets once when
// the job starts. Steady-state scans (nothing changed) allocate nothing.
func (p *Jobs) scan(j *job, nowN int64) {
	j.scanned, j.needScan = nowN, false
	for _, f := range j.files() {
		f.missing = false
	}
	p.rels, p.nrels = p.rels[:0], 0
	p.path = append(p.path[:0], j.dirZ[:len(j.dirZ)-1]...)
	if err := p.walk(len(p.path), 0); err != nil {
		if gone(err) {
			j.ended = true
			p.vanished++
			return
		}
		p.fail(fmt.Errorf("list %s: %w", p.path, err))
	}
	for i := range j.leaves {
		j.leaves[i].used = false
	}
	for rest := p.rels; len(rest) > 0; {
		var rel []byte
		rel, rest, _ = bytes.Cut(rest, []byte{'\n'})
		found := false
		for i := range j.leaves {
			if j.leaves[i].rel == string(rel) {
				j.leaves[i].used, found = true, true
				break
			}
		}
		if !found {
			threads := "cgroup.threads"
			if p.layout == layoutV1 {
				threads = "tasks"
			}
			dir := string(j.dirZ[:len(j.dirZ)-1]) + "/" + string(rel) + "/"
			j.leaves = append(j.leaves, leaf{rel: string(rel), used: true,
				procs: newFile([]byte(dir + "cgroup.procs")), threads: newFile([]byte(dir + threads))})
		}
	}
	n := 0
	for i := range j.leaves {
		if !j.leaves[i].used {
			p.fds.close(&j.leaves[i].procs)
			p.fds.close(&j.leaves[i].threads)
			continue
		}
		j.leaves[n] = j.leaves[i]
		n++
	}
	clear(j.leaves[n:])
	j.leaves = j.leaves[:n]

	// Files found missing are tried again at each scan.
	j.hasLimit, j.hasCPUs = false, false
	if data := p.readJob(j, &j.limit); data != nil {
		if v, ok, err := parseLimit(data); err != nil {
			p.fail(fmt.Errorf("%s: %w", j.limit.name(), err))
		} else if ok {
			j.limitV, j.hasLimit = float64(v), true
		}
	}
	if data := p.readJob(j, &j.cpuset); data != nil {
		if n, err := countCPUs(data); err != nil {
			p.fail(fmt.Errorf("%s: %w", j.cpuset.name(), err))
		} else if n > 0 {
			j.cpusV, j.hasCPUs = float64(n), true
		}
	}
}

// walk lists p.path (a directory at depth below the job directory) and
// records in p.rels the directories whose processes count: the leaves,
// where Slurm puts the tasks (task_<t>, or the step itself without
// task/cgroup). Slurm's own "slurm" directories (slurmstepd, cgroup v2)
// are skipped; cgroup v1 keeps slurmstepd in the step directory, which is
// not a leaf.
func (p *Jobs) walk(jobLen, depth int) error {
	p.path = append(p.path, 0)
	err := listDirs(p.path, &p.dbufs[depth+2], &p.names[depth+2])
	p.path = p.path[:len(p.path)-1]
	if err != nil {
		if depth > 0 && gone(err) {
			return nil // a step ended meanwhile
		}
		return err
	}
	names := p.names[depth+2]
	if depth > 0 && len(names) == 0 {
		p.addRel(jobLen)
	}
	base := len(p.path)
	for _, name := range names {
		if string(name) == "slurm" || (depth == 0 && !bytes.HasPrefix(name, []byte("step_"))) {
			continue
		}
		p.path = append(append(p.path[:base], '/'), name...)
		if bytes.HasPrefix(name, []byte("task_")) || depth+1 == maxDepth {
			// Slurm makes nothing below a task: a leaf, not listed.
			p.addRel(jobLen)
			continue
		}
		if err := p.walk(jobLen, depth+1); err != nil {
			p.path = p.path[:base]
			return err
		}
	}
	p.path = p.path[:base]
	return nil
}

// addRel records p.path, relative to the job directory, as a leaf.
func (p *Jobs) addRel(jobLen int) {
	if p.nrels < maxLeaves {
		p.rels = append(append(p.rels, p.path[jobLen+1:]...), '\n')
		p.nrels++
	}
}

// detect looks for Slurm's cgroup roots. It runs at start and, while none
// is found, once per rescan interval, so a node without Slurm pays
// nothing per tick.
func (p *Jobs) detect(nowN int64) {
	p.detectedAt = nowN
	p.closeRoots()
	p.roots = nil
	msg := ""
	if _, err := os.Stat(filepath.Join(p.cg, "cgroup.controllers")); err == nil {
		p.layout = layoutV2
		for _, parent := range []string{filepath.Join(p.cg, "system.slice"), p.cg} {
			for _, name := range subdirs(parent) {
				if p.wantScope(name) {
					p.addRoot(root{primary: filepath.Join(parent, name)})
				}
			}
		}
		if len(p.roots) == 0 {
			for _, name := range subdirs(p.cg) {
				if name == "slurm" || strings.HasPrefix(name, "slurm_") {
					msg = "unknown Slurm cgroup layout: " + filepath.Join(p.cg, name) +
						" on a cgroup v2 hierarchy, where Slurm uses system.slice/slurmstepd.scope; nothing is read"
				}
			}
		}
	} else {
		p.layout = layoutV1
		byName := map[string]*root{}
		var names []string
		for c, ctrl := range ctrlNames {
			for _, name := range subdirs(filepath.Join(p.cg, ctrl)) {
				if !p.wantV1(name) {
					continue
				}
				r := byName[name]
				if r == nil {
					r = &root{}
					byName[name] = r
					names = append(names, name)
				}
				r.ctrl[c] = filepath.Join(p.cg, ctrl, name)
			}
		}
		for _, name := range names {
			r := byName[name]
			for _, base := range r.ctrl {
				if base != "" {
					r.primary = base
					break
				}
			}
			p.addRoot(*r)
		}
		if len(p.roots) == 0 {
			for _, hier := range []string{"unified", "systemd"} {
				for _, name := range subdirs(filepath.Join(p.cg, hier, "system.slice")) {
					if strings.HasSuffix(name, "slurmstepd.scope") {
						msg = "unknown Slurm cgroup layout: " + filepath.Join(p.cg, hier, "system.slice", name) +
							" on a hybrid cgroup v1 hierarchy, where this plugin reads <controller>/slurm[_<node>]; nothing is read"
					}
				}
			}
		}
	}
	if len(p.roots) == 0 {
		p.layout = layoutNone
	}
	if msg != "" && msg != p.layoutMsg {
		p.log.Warn(msg)
	}
	p.layoutMsg = msg
	if len(p.roots) > 0 {
		p.log.Debug("Slurm cgroups found", "root", p.roots[0].primary, "roots", len(p.roots))
	}
}

func (p *Jobs) addRoot(r root) {
	r.dir = newDirFD(append([]byte(r.primary), 0))
	r.uids = map[uint32]*uidDir{}
	p.roots = append(p.roots, r)
}

// wantScope says whether a v2 directory is a slurmstepd scope to read.
func (p *Jobs) wantScope(name string) bool {
	if p.cfg.NodeName != "" {
		return name == p.cfg.NodeName+"_slurmstepd.scope" || name == "slurmstepd.scope"
	}
	return name == "slurmstepd.scope" || strings.HasSuffix(name, "_slurmstepd.scope")
}

// wantV1 says whether a v1 controller's directory is a Slurm root.
func (p *Jobs) wantV1(name string) bool {
	if p.cfg.NodeName != "" {
		return name == "slurm_"+p.cfg.NodeName || name == "slurm"
	}
	return name == "slurm" || strings.HasPrefix(name, "slurm_")
}

// subdirs lists the directories in dir, sorted; none if unreadable.
func subdirs(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}
