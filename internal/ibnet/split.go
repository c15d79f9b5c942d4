package ibnet

import (
	"bytes"
	"slices"
	"strings"
)

// Fat-tree levels of a switch.
const (
	LevelLeaf  = "leaf"
	LevelSpine = "spine"
	LevelCore  = "core"
)

// Levels computes each switch's fat-tree position: a switch with a CA
// neighbour is a leaf, a switch linked to a leaf is a spine, others core.
func Levels(t Topology) map[uint64]string {
	lv := make(map[uint64]string, len(t.Switches))
	for _, s := range t.Switches {
		for _, p := range s.Ports {
			if p.RemoteType == TypeCA {
				lv[s.GUID] = LevelLeaf
				break
			}
		}
	}
	for _, s := range t.Switches {
		if lv[s.GUID] != "" {
			continue
		}
		lv[s.GUID] = LevelCore
		for _, p := range s.Ports {
			if p.RemoteType == TypeSwitch && lv[p.RemoteGUID] == LevelLeaf {
				lv[s.GUID] = LevelSpine
				break
			}
		}
	}
	return lv
}

// HostOfDesc is the host name an HCA's node description names: its first
// word ("cn001 HCA-1" → "cn001"), as the node label of that host.
func HostOfDesc(desc string) string {
	if i := strings.IndexByte(desc, ' '); i >= 0 {
		return desc[:i]
	}
	return desc
}

// Split assigns every switch to exactly one of hosts, deterministically
// from the topology alone, so every host computes the same split without
// talking: a leaf goes to a listed host attached below it (the least
// loaded if several), then the other switches, spines first, go in GUID
// order to the least loaded host. Returns switch GUID → host.
func Split(t Topology, hosts []string) map[uint64]string {
	hs := slices.Clone(hosts)
	slices.Sort(hs)
	hs = slices.Compact(hs)
	out := make(map[uint64]string, len(t.Switches))
	if len(hs) == 0 {
		return out
	}
	load := make(map[string]int, len(hs))
	least := func(cands []string) string {
		best := cands[0]
		for _, h := range cands[1:] {
			if load[h] < load[best] {
				best = h
			}
		}
		load[best]++
		return best
	}
	sw := slices.Clone(t.Switches)
	slices.SortFunc(sw, func(a, b Switch) int {
		switch {
		case a.GUID < b.GUID:
			return -1
		case a.GUID > b.GUID:
			return 1
		}
		return bytes.Compare([]byte(a.Desc), []byte(b.Desc))
	})
	lv := Levels(t)
	var cands []string
	for _, s := range sw {
		if lv[s.GUID] != LevelLeaf {
			continue
		}
		cands = cands[:0]
		for _, p := range s.Ports {
			if p.RemoteType != TypeCA {
				continue
			}
			h := HostOfDesc(p.RemoteDesc)
			if _, ok := slices.BinarySearch(hs, h); ok && !slices.Contains(cands, h) {
				cands = append(cands, h)
			}
		}
		if len(cands) > 0 {
			slices.Sort(cands)
			out[s.GUID] = least(cands)
		}
	}
	for _, level := range []string{LevelSpine, LevelCore, LevelLeaf} {
		for _, s := range sw {
			if _, done := out[s.GUID]; !done && lv[s.GUID] == level {
				out[s.GUID] = least(hs)
			}
		}
	}
	return out
}
