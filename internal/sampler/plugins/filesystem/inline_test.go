package filesystem

import (
	"context"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

func TestInlineSafe(t *testing.T) {
	const mountinfo = `1 0 8:1 / / rw - ext4 /dev/sda1 rw
2 1 0:5 / /dev rw - devtmpfs udev rw
3 2 0:6 / /dev/shm rw - tmpfs tmpfs rw
4 1 0:40 / /home rw - nfs srv:/home rw
5 4 8:2 / /home/scratch rw - xfs /dev/sdb rw
6 1 0:41 / /lustre rw - lustre mgs@tcp:/fs rw
7 1 0:42 / /tmp rw - tmpfs tmpfs rw
9 10 0:44 / /loop1 rw - tmpfs tmpfs rw
10 9 0:45 / /loop2 rw - tmpfs tmpfs rw
`
	table := map[uint64]mountRef{}
	byMP := map[string]uint64{}
	if err := ParseMountinfo([]byte(mountinfo), func(mi Mountinfo) {
		table[mi.ID] = mountRef{fstype: string(mi.FSType), parent: mi.Parent}
		byMP[string(mi.MountPoint)] = mi.ID
	}); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(DefaultInlineFSTypes)
	for mp, want := range map[string]bool{
		"/":             true,
		"/dev":          true, // devtmpfs: excluded from the report, but crossed by /dev/shm
		"/dev/shm":      true,
		"/home":         false, // nfs
		"/home/scratch": false, // xfs, but the walk crosses nfs
		"/lustre":       false,
		"/tmp":          true,
		"/loop1":        false, // a cycle of parents, not a tree
	} {
		if got := inlineSafe(byMP[mp], table, re); got != want {
			t.Errorf("inlineSafe(%s) = %v, want %v", mp, got, want)
		}
	}
	if inlineSafe(42, table, re) {
		t.Error("inlineSafe of an unknown mount = true")
	}
}

// The statfs made on the tick reports what a worker's does, on this
// machine's local mounts.
func TestInlineMatchesWorker(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo")
	}
	cfg := Config{
		MountPointsExclude: DefaultMountPointsExclude, FSTypesExclude: DefaultFSTypesExclude,
		InlineFSTypes: DefaultInlineFSTypes, MountRefresh: sampler.Duration(time.Minute),
		StatTimeout: sampler.Duration(5 * time.Second), MaxMounts: 1024,
	}
	inline, worker := New(cfg), NewWithStatfs(cfg, syscall.Statfs)
	size := map[*Filesystem]map[string]float64{}
	for _, p := range []*Filesystem{inline, worker} {
		if err := p.Init(sampler.Env{FS: kernfs.NewFS("/")}); err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		size[p] = map[string]float64{}
		for _, s := range b.Samples() {
			if s.Desc.Name == "node_filesystem_size_bytes" {
				size[p][s.Desc.Labels[2].Value] = s.Value
			}
		}
	}
	n := 0
	for _, m := range inline.mounts {
		if m.inline {
			n++
			mp := m.path
			if got, want := size[inline][mp], size[worker][mp]; got != want || got == 0 {
				t.Errorf("%s: size %v on the tick, %v from a worker", mp, got, want)
			}
		}
	}
	for _, m := range worker.mounts {
		if m.inline {
			t.Errorf("%s: statfs on the tick with an injected statfs", m.path)
		}
	}
	if n == 0 {
		t.Skip("no local file system here to statfs on the tick")
	}
	t.Logf("%d of %d mounts statfs'ed on the tick", n, len(inline.mounts))
}
