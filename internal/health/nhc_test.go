package health

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
)

// A site's nhc.conf, written for this test: every mappable form once,
// and lines that must not be taken.
const nhcConf = `# site checks
* || check_fs_mount_rw -f /
  *   ||   check_fs_mount_rw -t lustre -s 10.1.0.1@o2ib:/scratch -f /scratch -f /scratch2
* || check_fs_mount_ro /usr nfs01:/usr nfs
* || check_fs_mount -r -O rw -t nfs4 -f /home
* || check_fs_free /tmp 10%
* || check_fs_free /var 1048576
* || check_hw_cpuinfo 2 32 64
* || check_hw_physmem 256gb 256gb 5%
* || check_hw_physmem 268435456 270532608
* || check_ps_service -u root -S sshd
* || check_ps_service -d rpc.statd -r nfslock
* || check_ps_daemon /usr/sbin/munged munge
* || check_cmd_status -t 3 -r 0 /usr/bin/true
* || check_cmd_status -r 1 selinuxenabled
* || check_file_test -d -w "/local scratch"
cn0* || check_fs_mount_rw -f /gpfs
/^gpu[0-9]+$/ || check_ps_service nvidia-persistenced
{cn[001-004]} || check_fs_free /tmp 5%
* || check_fs_mount_rw -s '*:/home' -f /home
* || check_fs_mount -o '/vers=3/' -f /nfs
* || check_ps_service -k ypbind
* || check_ps_loadavg $((2*HW_CORES))
* || check_moab_rm -t 10
* || export TIMEOUT=30
* || check_unknown_thing
just garbage
`

func TestImportNHC(t *testing.T) {
	im, err := ImportNHC(strings.NewReader(nhcConf), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []CheckConfig{
		{Name: "mount_root", Type: "mount", Path: "/", ReadWrite: true},
		{Name: "mount_scratch", Type: "mount", Path: "/scratch", ReadWrite: true, FSType: "lustre", Source: "10.1.0.1@o2ib:/scratch"},
		{Name: "mount_scratch2", Type: "mount", Path: "/scratch2", ReadWrite: true, FSType: "lustre", Source: "10.1.0.1@o2ib:/scratch"},
		{Name: "mount_usr", Type: "mount", Path: "/usr", ReadOnly: true, FSType: "nfs", Source: "nfs01:/usr"},
		{Name: "mount_home", Type: "mount", Path: "/home", FSType: "nfs4"},
		{Name: "free_tmp", Type: "free_space", Path: "/tmp", MinFree: "10%"},
		{Name: "free_var", Type: "free_space", Path: "/var", MinFree: "1048576k"},
		{Name: "cpus", Type: "cpus", Expected: "64"},
		{Name: "memory", Type: "memory", Expected: "268435456k", Tolerance: "13743895347"},
		{Name: "memory_2", Type: "memory", Expected: "269484032k", Tolerance: "1048576k"},
		{Name: "ps_sshd", Type: "process", Process: "sshd"},
		{Name: "ps_nfslock", Type: "process", Process: "rpc.statd"},
		{Name: "ps_munged", Type: "process", Process: "munged"},
		{Name: "cmd_true", Type: "command", Command: []string{"/usr/bin/true"}, Timeout: duration.Duration(3 * time.Second)},
		{Name: "cmd_selinuxenabled", Type: "command", Shell: true, Command: []string{"selinuxenabled >/dev/null 2>&1; test $? -eq 1"}},
		{Name: "file_local_scratch", Type: "command", Shell: true, Command: []string{"test -d '/local scratch' && test -w '/local scratch'"}},
	}
	if len(im.Checks) != len(want) {
		for _, c := range im.Checks {
			t.Logf("%+v", c)
		}
		t.Fatalf("%d checks, want %d", len(im.Checks), len(want))
	}
	for i := range want {
		g, w := im.Checks[i], want[i]
		if g.Name != w.Name || g.Type != w.Type || g.Path != w.Path || g.ReadWrite != w.ReadWrite || g.ReadOnly != w.ReadOnly ||
			g.FSType != w.FSType || g.Source != w.Source || g.MinFree != w.MinFree || g.Expected != w.Expected ||
			g.Tolerance != w.Tolerance || g.Process != w.Process || g.Shell != w.Shell || g.Timeout != w.Timeout ||
			strings.Join(g.Command, "\x00") != strings.Join(w.Command, "\x00") {
			t.Errorf("check %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if _, err := Compile(im.Checks, time.Minute, 10*time.Second); err != nil {
		t.Fatalf("imported checks do not compile: %v", err)
	}
	reasons := map[int]string{}
	for _, s := range im.Skipped {
		reasons[s.Line] = s.Reason
	}
	for line, want := range map[int]string{
		17: "give --node", 18: "give --node", 19: "node ranges", 20: "Vigil compares exact sources",
		21: "mount options", 22: "must not run", 23: "node_load1", 24: "Moab", 25: "NHC variable",
		26: "not an NHC check", 27: "not a \"hostmask || check\" line",
	} {
		if !strings.Contains(reasons[line], want) {
			t.Errorf("line %d: reason %q, want %q", line, reasons[line], want)
		}
	}
	if notes := strings.Join(im.Notes[4], "; "); !strings.Contains(notes, "-r (remount or action) dropped") {
		t.Errorf("notes of mount_home: %q", notes)
	}

	// With a node, its hostmask lines are taken.
	im, err = ImportNHC(strings.NewReader(nhcConf), "gpu12")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range im.Checks {
		found = found || c.Process == "nvidia-persistenced"
		if c.Path == "/gpfs" {
			t.Error("cn0* line taken for gpu12")
		}
	}
	if !found {
		t.Error("/^gpu[0-9]+$/ line not taken for gpu12")
	}

	var out bytes.Buffer
	if err := im.WriteTOML(&out, "nhc.conf"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[plugins.health]\n", "# nhc.conf line 2\n[[plugins.health.check]]\nname = \"mount_root\"\ntype = \"mount\"\npath = \"/\"\nread_write = true\n",
		`command = ["test -d '/local scratch' && test -w '/local scratch'"]`, "# line 23: * || check_ps_loadavg $((2*HW_CORES))\n#   load average"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("TOML lacks %q:\n%s", want, out.String())
		}
	}
}

func TestShellWords(t *testing.T) {
	for in, want := range map[string]string{
		`a b  c`:            "a|b|c",
		`-s 'x y' "z \" w"`: `-s|x y|z " w`,
		`a\ b`:              "a b",
		`''`:                "",
	} {
		got, err := shellWords(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("shellWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`'open`, `"open`, `a; b`, "a `b`", `$X`} {
		if _, err := shellWords(in); err == nil {
			t.Errorf("shellWords(%q): no error", in)
		}
	}
}

func FuzzImportNHC(f *testing.F) {
	f.Add(nhcConf)
	f.Fuzz(func(t *testing.T, s string) {
		im, err := ImportNHC(strings.NewReader(s), "n1")
		if err != nil {
			return
		}
		var b bytes.Buffer
		_ = im.WriteTOML(&b, "f")
	})
}
