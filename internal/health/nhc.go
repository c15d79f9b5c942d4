package health

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
)

// Bounds on an nhc.conf being imported.
const (
	maxNHCLines   = 100000
	maxNHCLineLen = 64 << 10
)

// Imported is the result of converting an nhc.conf.
type Imported struct {
	Checks []CheckConfig
	// Notes per check (what of the NHC line was dropped), same index.
	Notes [][]string
	// Source line of each check.
	Lines []int
	// Skipped lines that have no Vigil equivalent, with the reason.
	Skipped []Skip
}

// Skip is one nhc.conf line not converted.
type Skip struct {
	Line   int
	Text   string
	Reason string
}

// ImportNHC converts the checks of an nhc.conf ("hostmask || check args")
// that map one to one onto Vigil checks. Lines are taken when their
// hostmask is "*", or matches node (a glob or /regex/) when node is set.
func ImportNHC(r io.Reader, node string) (*Imported, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxNHCLineLen)
	im := &Imported{}
	names := map[string]int{}
	n := 0
	for sc.Scan() {
		n++
		if n > maxNHCLines {
			return nil, fmt.Errorf("line %d: more than %d lines", n, maxNHCLines)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		mask, check, ok := strings.Cut(line, "||")
		if !ok {
			im.Skipped = append(im.Skipped, Skip{n, line, "not a \"hostmask || check\" line"})
			continue
		}
		mask, check = strings.TrimSpace(mask), strings.TrimSpace(check)
		if take, why := hostMatches(mask, node); !take {
			im.Skipped = append(im.Skipped, Skip{n, line, why})
			continue
		}
		args, err := shellWords(check)
		if err != nil || len(args) == 0 {
			why := fmt.Sprintf("cannot split into words: %v", err)
			if f := strings.Fields(check); len(f) > 0 && unmapped[f[0]] != "" {
				why = unmapped[f[0]]
			}
			im.Skipped = append(im.Skipped, Skip{n, line, why})
			continue
		}
		cs, notes, why := convert(args)
		if why != "" {
			im.Skipped = append(im.Skipped, Skip{n, line, why})
			continue
		}
		for _, c := range cs {
			base := sanitizeName(c.Name)
			c.Name = base
			if k := names[base]; k > 0 {
				c.Name = fmt.Sprintf("%s_%d", base, k+1)
			}
			names[base]++
			im.Checks = append(im.Checks, c)
			im.Notes = append(im.Notes, notes)
			im.Lines = append(im.Lines, n)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return im, nil
}

// hostMatches decides whether a line applies to node.
func hostMatches(mask, node string) (bool, string) {
	switch {
	case mask == "*":
		return true, ""
	case strings.HasPrefix(mask, "{"):
		return false, "node ranges (" + mask + ") are not expanded"
	case node == "":
		return false, "hostmask " + mask + " (give --node to select the lines of one node)"
	case len(mask) > 1 && mask[0] == '/' && mask[len(mask)-1] == '/':
		re, err := regexp.Compile(mask[1 : len(mask)-1])
		if err != nil {
			return false, "hostmask " + mask + ": bad regular expression"
		}
		if re.MatchString(node) {
			return true, ""
		}
	default:
		if ok, _ := path.Match(mask, node); ok {
			return true, ""
		}
	}
	return false, "hostmask " + mask + " does not match " + node
}

// shellWords splits a check line as bash would split simple words:
// whitespace, single and double quotes, backslash escapes.
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote")
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ';' || c == '|' || c == '&' || c == '$' || c == '`' || c == '(' || c == '>' || c == '<':
			return nil, fmt.Errorf("shell syntax %q", string(c))
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// getopt splits NHC-style options: flags take a value when listed in
// withValue. It stops at the first non-option word.
func getopt(args []string, withValue string) (opts []option, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return opts, args[i+1:], nil
		}
		if len(a) < 2 || a[0] != '-' || a == "-" {
			return opts, args[i:], nil
		}
		for j := 1; j < len(a); j++ {
			f := a[j]
			if strings.IndexByte(withValue, f) < 0 {
				opts = append(opts, option{f, ""})
				continue
			}
			v := a[j+1:]
			if v == "" {
				if i+1 >= len(args) {
					return nil, nil, fmt.Errorf("option -%c needs a value", f)
				}
				i++
				v = args[i]
			}
			opts = append(opts, option{f, v})
			break
		}
	}
	return opts, nil, nil
}

type option struct {
	flag  byte
	value string
}

// plainMatch reports whether an NHC match string is a literal (not a
// glob, /regex/ or negation), which is what Vigil compares.
func plainMatch(s string) bool {
	return s != "" && !strings.ContainsAny(s, "*?[") && s[0] != '!' && !(len(s) > 1 && s[0] == '/' && s[len(s)-1] == '/')
}

// nhcSize converts an NHC size (kB unless it has a unit) or percentage.
func nhcSize(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "%") {
		_, _, err := parseAmount(s)
		return s, err == nil
	}
	if s != "" && s[len(s)-1] >= '0' && s[len(s)-1] <= '9' {
		s += "k"
	}
	_, b, err := parseAmount(s)
	return s, err == nil && b > 0
}

// convert maps one NHC check line onto Vigil checks; why says why not.
func convert(args []string) (checks []CheckConfig, notes []string, why string) {
	name, args := args[0], args[1:]
	note := func(format string, a ...any) { notes = append(notes, fmt.Sprintf(format, a...)) }
	switch name {
	case "export":
		return nil, nil, "NHC variable (" + strings.Join(args, " ") + "); Vigil has no equivalent setting"
	case "check_fs_mount", "check_fs_mount_rw", "check_fs_mount_ro":
		opts, rest, err := getopt(args, "tsoOeEfF")
		if err != nil {
			return nil, nil, err.Error()
		}
		base := CheckConfig{Type: "mount", ReadWrite: name == "check_fs_mount_rw", ReadOnly: name == "check_fs_mount_ro"}
		var points []string
		for _, o := range opts {
			switch o.flag {
			case 'f', 'F':
				points = append(points, o.value)
			case 't', 's':
				if !plainMatch(o.value) {
					return nil, nil, fmt.Sprintf("match string %q: Vigil compares exact %s", o.value, map[byte]string{'t': "file system types", 's': "sources"}[o.flag])
				}
				if o.flag == 't' {
					base.FSType = o.value
				} else {
					base.Source = o.value
				}
			case 'o':
				return nil, nil, "mount options (-o " + o.value + ") are not compared, only rw/ro"
			case 'r', 'O', 'e', 'E':
				note("-%c (remount or action) dropped: Vigil only observes", o.flag)
			case '0':
				note("-0 (non-fatal) dropped: a failing check is a metric, never fatal")
			default:
				return nil, nil, fmt.Sprintf("option -%c not understood", o.flag)
			}
		}
		if len(points) > 0 {
			points = append(points, rest...) // -f a b c
		} else if len(rest) > 0 { // deprecated: mountpoint [source] [fstype]
			points = rest[:1]
			for i, v := range rest[1:min(len(rest), 3)] {
				if !plainMatch(v) {
					return nil, nil, fmt.Sprintf("match string %q: Vigil compares exact values", v)
				}
				if i == 0 {
					base.Source = v
				} else {
					base.FSType = v
				}
			}
			if len(rest) > 3 {
				return nil, nil, "mount options are not compared, only rw/ro"
			}
		}
		if len(points) == 0 {
			return nil, nil, "no mount point"
		}
		for _, p := range points {
			c := base
			c.Path, c.Name = p, "mount"+pathName(p)
			checks = append(checks, c)
		}
		return checks, notes, ""
	case "check_fs_free":
		if len(args) != 2 {
			return nil, nil, "want: check_fs_free mountpoint minfree"
		}
		s, ok := nhcSize(args[1])
		if !ok {
			return nil, nil, fmt.Sprintf("minfree %q not understood", args[1])
		}
		return []CheckConfig{{Name: "free" + pathName(args[0]), Type: "free_space", Path: args[0], MinFree: s}}, nil, ""
	case "check_hw_cpuinfo":
		if len(args) < 3 {
			return nil, nil, "only the thread count (third argument) maps, to online CPUs"
		}
		if _, err := strconv.Atoi(args[2]); err != nil {
			return nil, nil, fmt.Sprintf("thread count %q not a number", args[2])
		}
		note("sockets (%s) and cores (%s) not checked: cpus compares online CPUs, NHC's thread count", args[0], args[1])
		return []CheckConfig{{Name: "cpus", Type: "cpus", Expected: args[2]}}, notes, ""
	case "check_hw_physmem":
		if len(args) < 2 || len(args) > 3 {
			return nil, nil, "want: check_hw_physmem min max [fudge]"
		}
		lo, ok1 := nhcSize(args[0])
		hi, ok2 := nhcSize(args[1])
		if !ok1 || !ok2 || strings.HasSuffix(lo, "%") || strings.HasSuffix(hi, "%") {
			return nil, nil, "min and max must be sizes"
		}
		_, loB, _ := parseAmount(lo)
		_, hiB, _ := parseAmount(hi)
		if hiB < loB {
			return nil, nil, "max below min"
		}
		want, tol := (loB+hiB)/2, (hiB-loB)/2
		if len(args) == 3 {
			f, ok := nhcSize(args[2])
			if !ok {
				return nil, nil, fmt.Sprintf("fudge %q not understood", args[2])
			}
			pct, b, _ := parseAmount(f)
			if pct >= 0 {
				b = uint64(float64(want) * pct / 100)
			}
			tol += b
		}
		return []CheckConfig{{Name: "memory", Type: "memory", Expected: kib(want), Tolerance: kib(tol)}}, nil, ""
	case "check_ps_service", "check_ps_daemon":
		if name == "check_ps_daemon" {
			if len(args) == 0 || len(args) > 2 {
				return nil, nil, "arguments after the owner (a command line match) are not compared"
			}
			if len(args) == 2 {
				note("owner %s not checked", args[1])
			}
			return []CheckConfig{{Name: "ps_" + path.Base(args[0]), Type: "process", Process: path.Base(args[0])}}, notes, ""
		}
		opts, rest, err := getopt(args, "udmeE")
		if err != nil {
			return nil, nil, err.Error()
		}
		if len(rest) != 1 {
			return nil, nil, "want one service name"
		}
		proc := rest[0]
		for _, o := range opts {
			switch o.flag {
			case 'd':
				proc = o.value
			case 'u':
				note("owner %s not checked", o.value)
			case 'S', 'r', 'c', 'e', 'E':
				note("-%c (start, restart or action) dropped: Vigil only observes", o.flag)
			case '0':
				note("-0 (non-fatal) dropped")
			case 's', 'k':
				return nil, nil, "a service that must not run is not a Vigil check"
			case 'm', 'f':
				return nil, nil, "command line match strings are not supported (Vigil matches the command name)"
			default:
				return nil, nil, fmt.Sprintf("option -%c not understood", o.flag)
			}
		}
		return []CheckConfig{{Name: "ps_" + rest[0], Type: "process", Process: path.Base(proc)}}, notes, ""
	case "check_cmd_status":
		opts, rest, err := getopt(args, "tr")
		if err != nil {
			return nil, nil, err.Error()
		}
		if len(rest) == 0 {
			return nil, nil, "no command"
		}
		c := CheckConfig{Name: "cmd_" + path.Base(rest[0]), Type: "command", Command: rest}
		ret := "0"
		for _, o := range opts {
			switch o.flag {
			case 't':
				secs, err := strconv.Atoi(o.value)
				if err != nil || secs < 1 {
					return nil, nil, fmt.Sprintf("timeout %q not understood", o.value)
				}
				c.Timeout = duration.Duration(time.Duration(secs) * time.Second)
			case 'r':
				if _, err := strconv.Atoi(o.value); err != nil {
					return nil, nil, fmt.Sprintf("exit status %q not understood", o.value)
				}
				ret = o.value
			default:
				return nil, nil, fmt.Sprintf("option -%c not understood", o.flag)
			}
		}
		if ret != "0" {
			c.Shell = true
			c.Command = []string{shellJoin(rest) + " >/dev/null 2>&1; test $? -eq " + ret}
		}
		return []CheckConfig{c}, nil, ""
	case "check_file_test":
		opts, files, err := getopt(args, "")
		if err != nil {
			return nil, nil, err.Error()
		}
		if len(opts) == 0 || len(files) == 0 {
			return nil, nil, "want: check_file_test -TESTS file..."
		}
		var tests []string
		for _, f := range files {
			for _, o := range opts {
				if strings.IndexByte("bcdefgGhkLNOprsSuwx", o.flag) < 0 {
					return nil, nil, fmt.Sprintf("test -%c not in test(1)", o.flag)
				}
				tests = append(tests, fmt.Sprintf("test -%c %s", o.flag, shellQuote(f)))
			}
		}
		return []CheckConfig{{Name: "file" + files[0], Type: "command", Shell: true, Command: []string{strings.Join(tests, " && ")}}}, nil, ""
	}
	if why, ok := unmapped[name]; ok {
		return nil, nil, why
	}
	return nil, nil, "not an NHC check Vigil knows"
}

// unmapped says why the other NHC checks have no Vigil check.
var unmapped = map[string]string{
	"check_fs_used":             "use free_space, or a rule on node_filesystem_avail_bytes",
	"check_fs_size":             "file system size: a rule on node_filesystem_size_bytes",
	"check_fs_inodes":           "inodes: a rule on node_filesystem_files",
	"check_fs_ifree":            "free inodes: a rule on node_filesystem_files_free",
	"check_fs_iused":            "used inodes: a rule on node_filesystem_files_free",
	"check_hw_swap":             "swap size: a rule on node_memory_SwapTotal_bytes",
	"check_hw_mem":              "RAM plus swap: a rule on node_memory_*",
	"check_hw_physmem_free":     "free memory: a rule on node_memory_MemAvailable_bytes",
	"check_hw_swap_free":        "free swap: a rule on node_memory_SwapFree_bytes",
	"check_hw_mem_free":         "free memory: a rule on node_memory_MemAvailable_bytes",
	"check_hw_ib":               "InfiniBand port state: not yet (fabric plugin); a rule on node_infiniband_* meanwhile",
	"check_hw_eth":              "interface state: a rule on node_network_up",
	"check_hw_gm":               "Myrinet is not supported",
	"check_hw_mcelog":           "machine check errors: a rule on node_edac_* counters",
	"check_dmi_data_match":      "DMI contents: a site script (dmidecode needs root and takes seconds)",
	"check_dmi_raw_data_match":  "DMI contents: a site script",
	"check_file_contents":       "file contents match strings: a site script",
	"check_file_stat":           "file ownership and age: a site script",
	"check_cmd_output":          "output match strings: a site script",
	"check_cmd_dmesg":           "kernel log matching: Vigil's log patterns and rules",
	"check_net_socket":          "socket table matching: tcp_port for a listening port, else a site script",
	"check_net_ping":            "a command check running ping",
	"check_nv_healthmon":        "NVIDIA healthmon: a command check",
	"check_nvsmi_healthmon":     "nvidia-smi: a command check",
	"check_ps_blacklist":        "processes that must not run: a site script",
	"check_ps_unauth_users":     "unauthorised users' processes (and killing them): a site script",
	"check_ps_userproc_lineage": "process lineage: a site script",
	"check_ps_cpu":              "per-process CPU: job metrics and rules",
	"check_ps_mem":              "per-process memory: job metrics and rules",
	"check_ps_physmem":          "per-process memory: job metrics and rules",
	"check_ps_time":             "per-process CPU time: job metrics and rules",
	"check_ps_kswapd":           "kswapd CPU: a rule on node_vmstat_* / pressure metrics",
	"check_ps_loadavg":          "load average: a rule on node_load1",
	"check_moab_sched":          "Moab is not supported",
	"check_moab_rm":             "Moab is not supported",
	"check_moab_torque":         "TORQUE is not supported",
}

// pathName names a check after a path: "/" is "_root".
func pathName(p string) string {
	if p == "/" {
		return "_root"
	}
	return p
}

// kib writes bytes in NHC's unit where exact.
func kib(b uint64) string {
	if b%1024 == 0 {
		return strconv.FormatUint(b/1024, 10) + "k"
	}
	return strconv.FormatUint(b, 10)
}

var nameBad = regexp.MustCompile(`[^A-Za-z0-9_.:-]+`)

// sanitizeName makes a check name from NHC words: "/scratch" → "scratch".
func sanitizeName(s string) string {
	s = strings.Trim(nameBad.ReplaceAllString(s, "_"), "_")
	if len(s) > 60 {
		s = s[:60]
	}
	if s == "" {
		s = "check"
	}
	return s
}

// shellQuote quotes s for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '=' || r == ',' || r == '+' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// WriteTOML writes the imported checks as [[plugins.health.check]] tables,
// each after a comment naming its nhc.conf line and what was dropped, and
// the skipped lines with their reasons.
func (im *Imported) WriteTOML(w io.Writer, source string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Converted from %s by `vigil health import-nhc`: %d checks, %d lines not converted.\n[plugins.health]\n", source, len(im.Checks), len(im.Skipped))
	for i, c := range im.Checks {
		fmt.Fprintf(bw, "\n# %s line %d\n", source, im.Lines[i])
		for _, n := range im.Notes[i] {
			fmt.Fprintf(bw, "# note: %s\n", n)
		}
		fmt.Fprintf(bw, "[[plugins.health.check]]\nname = %s\ntype = %s\n", tomlString(c.Name), tomlString(c.Type))
		str := func(k, v string) {
			if v != "" {
				fmt.Fprintf(bw, "%s = %s\n", k, tomlString(v))
			}
		}
		if c.Timeout != 0 {
			str("timeout", c.Timeout.String())
		}
		str("path", c.Path)
		if c.ReadWrite {
			fmt.Fprintln(bw, "read_write = true")
		}
		if c.ReadOnly {
			fmt.Fprintln(bw, "read_only = true")
		}
		str("fs_type", c.FSType)
		str("source", c.Source)
		str("min_free", c.MinFree)
		str("process", c.Process)
		str("expected", c.Expected)
		str("tolerance", c.Tolerance)
		if len(c.Command) > 0 {
			q := make([]string, len(c.Command))
			for j, a := range c.Command {
				q[j] = tomlString(a)
			}
			fmt.Fprintf(bw, "command = [%s]\n", strings.Join(q, ", "))
		}
		if c.Shell {
			fmt.Fprintln(bw, "shell = true")
		}
	}
	if len(im.Skipped) > 0 {
		fmt.Fprintf(bw, "\n# Not converted:\n")
		for _, s := range im.Skipped {
			fmt.Fprintf(bw, "# line %d: %s\n#   %s\n", s.Line, strings.ReplaceAll(s.Text, "\n", " "), s.Reason)
		}
	}
	return bw.Flush()
}
