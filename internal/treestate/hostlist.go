package treestate

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// HostOf returns the host part of "host:port", or s itself.
func HostOf(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// ReadHostFile reads one host (or host:port, or Slurm-style range such as
// cn[001-128,200]) per line; '#' starts a comment.
func ReadHostFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("children file: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		for _, word := range strings.Fields(line) {
			hosts, err := ExpandHostList(HostOf(word))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			out = append(out, hosts...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("children file %s: %w", path, err)
	}
	return out, nil
}

// maxExpand bounds a host-list expression, so a typo cannot ask for
// billions of names.
const maxExpand = 1 << 20

// ExpandHostList expands one bracket range: "cn[001-003,7]" → cn001 cn002
// cn003 cn7. Zero padding follows the width of the range's start.
func ExpandHostList(s string) ([]string, error) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		if strings.ContainsAny(s, "]") {
			return nil, fmt.Errorf("host %q: unmatched ']'", s)
		}
		return []string{s}, nil
	}
	end := strings.IndexByte(s[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("host list %q: missing ']'", s)
	}
	end += open
	prefix, body, suffix := s[:open], s[open+1:end], s[end+1:]
	rests, err := ExpandHostList(suffix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("host list %q: bad range %q (want N or N-M with N <= M)", s, part)
		}
		if len(out)+(b-a+1)*len(rests) > maxExpand {
			return nil, fmt.Errorf("host list %q: more than %d hosts", s, maxExpand)
		}
		for i := a; i <= b; i++ {
			num := strconv.Itoa(i)
			if len(num) < len(lo) {
				num = strings.Repeat("0", len(lo)-len(num)) + num
			}
			for _, r := range rests {
				out = append(out, prefix+num+r)
			}
		}
	}
	return out, nil
}
