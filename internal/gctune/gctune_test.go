package gctune

import (
	"io/fs"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"none", map[string]string{}, 0},
		{"v2 own cgroup", map[string]string{
			"/proc/self/cgroup": "0::/system.slice/vigil.service\n",
			"/sys/fs/cgroup/system.slice/vigil.service/memory.max": "2147483648\n",
		}, 2 << 30},
		{"v2 unlimited", map[string]string{
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "max\n",
		}, 0},
		{"v2 container root", map[string]string{
			"/proc/self/cgroup":         "0::/kubepods/pod1/c1\n",
			"/sys/fs/cgroup/memory.max": "1073741824\n",
		}, 1 << 30},
		{"v1", map[string]string{
			"/proc/self/cgroup": "5:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n",
		}, 512 << 20},
		{"v1 unlimited", map[string]string{
			"/proc/self/cgroup":                           "4:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"garbage", map[string]string{
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "lots\n",
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(p string) ([]byte, error) {
				if s, ok := tc.files[p]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			if got := cgroupMemoryLimit(read); got != tc.want {
				t.Errorf("cgroupMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}
