package server

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/vigil-hpc/vigil/internal/treestate"
)

// LoadTopology reads a topology file: one group per line, "GROUP: HOSTS",
// where HOSTS are names or host-list ranges (cn[001-032] gpu[1-4]); '#'
// starts a comment. The dashboard groups the heatmap by it; nodes not listed
// are grouped by their name pattern.
func LoadTopology(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	defer f.Close()
	groups := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		group, hosts, ok := strings.Cut(line, ":")
		group = strings.TrimSpace(group)
		if !ok || group == "" || strings.ContainsAny(group, " \t") {
			return nil, fmt.Errorf("%s:%d: want \"GROUP: host-list\", e.g. \"rack01: cn[001-032]\"", path, n)
		}
		for _, word := range strings.Fields(hosts) {
			names, err := treestate.ExpandHostList(word)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			for _, name := range names {
				if prev, dup := groups[name]; dup && prev != group {
					return nil, fmt.Errorf("%s:%d: node %s is already in group %s", path, n, name, prev)
				}
				groups[name] = group
			}
			if len(groups) > 1<<20 {
				return nil, fmt.Errorf("%s:%d: more than %d nodes", path, n, 1<<20)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("topology %s: %w", path, err)
	}
	return groups, nil
}
