// Package packaging holds the nfpm configurations, systemd units and
// maintainer scripts of the vigil-sampler and vigil packages, and the test
// that installs them on this machine.
package packaging

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
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

// Paths the packages install.
var (
	samplerFiles = []string{"/usr/bin/vigil-sampler", "/usr/lib/systemd/system/vigil-sampler.service", "/etc/vigil/vigil.toml"}
	vigilFiles   = []string{"/usr/bin/vigil", "/usr/lib/systemd/system/vigil-aggregator.service",
		"/usr/lib/systemd/system/vigil-server.service", "/etc/vigil/server.toml", "/etc/vigil/aggregator.toml", "/etc/vigil/rules/vigil.rules.yml", "/var/lib/vigil"}
	units = []string{"/usr/lib/systemd/system/vigil-sampler.service",
		"/usr/lib/systemd/system/vigil-aggregator.service", "/usr/lib/systemd/system/vigil-server.service"}
)

// debs returns the packages `make package` built, or calls MissingPeer.
func debs(t *testing.T) (sampler, full string) {
	t.Helper()
	arch := runtime.GOARCH
	find := func(pattern string) string {
		m, _ := filepath.Glob(filepath.Join("..", "build", "packages", pattern))
		if len(m) != 1 {
			testutil.MissingPeer(t, "want one %s in build/packages, found %d: run make package", pattern, len(m))
		}
		p, err := filepath.Abs(m[0])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return find("vigil-sampler_*_" + arch + ".deb"), find("vigil_*_" + arch + ".deb")
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func installed(pkg string) bool {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", pkg).Output()
	return err == nil && string(out) != "not-installed" && string(out) != ""
}

// TestDebInstallRunPurge installs both .deb packages on this machine,
// checks the files, the vigil user and the units, runs the installed
// sampler, server and `vigil sample --once` as that user, and purges them.
// It needs root and dpkg, and refuses to touch a machine where Vigil is
// already installed.
func TestDebInstallRunPurge(t *testing.T) {
	if testing.Short() {
		t.Skip("installs packages; not in -short")
	}
	testutil.LookPeer(t, "dpkg", "a Debian system")
	if os.Geteuid() != 0 {
		testutil.MissingPeer(t, "installing packages needs root")
	}
	samplerDeb, fullDeb := debs(t)
	for _, p := range []string{"vigil-sampler", "vigil"} {
		if installed(p) {
			testutil.MissingPeer(t, "package %s is installed on this machine; the test will not replace it", p)
		}
	}
	// Purge deletes /var/lib/vigil: never run over someone's data.
	for _, f := range append(append(slices.Clone(samplerFiles), vigilFiles...), "/etc/vigil") {
		if _, err := os.Lstat(f); err == nil {
			testutil.MissingPeer(t, "%s exists on this machine; the test will not install over it", f)
		}
	}
	_, err := user.Lookup("vigil")
	userBefore := err == nil

	t.Cleanup(func() {
		// Leave the machine as found, even when the test failed midway.
		exec.Command("dpkg", "--purge", "vigil", "vigil-sampler").Run()
		if !userBefore {
			exec.Command("userdel", "vigil").Run()
			exec.Command("groupdel", "vigil").Run()
		}
	})

	run(t, "dpkg", "-i", samplerDeb)
	// A reinstall runs the scripts again (preinst upgrade): they are idempotent.
	run(t, "dpkg", "-i", samplerDeb)
	run(t, "dpkg", "-i", fullDeb)

	for _, f := range append(slices.Clone(samplerFiles), vigilFiles...) {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("installed file: %v", err)
		}
	}
	for _, f := range []string{"/usr/bin/vigil-sampler", "/usr/bin/vigil"} {
		if fi, err := os.Stat(f); err == nil && fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755", f, fi.Mode().Perm())
		}
	}
	if cf := run(t, "dpkg-query", "-W", "-f=${Conffiles}", "vigil-sampler"); !strings.Contains(cf, "/etc/vigil/vigil.toml") {
		t.Errorf("/etc/vigil/vigil.toml is not a conffile of vigil-sampler: %q", cf)
	}

	// The user: a system account without a login shell, in its own group.
	u, err := user.Lookup("vigil")
	if err != nil {
		t.Fatalf("user vigil after install: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if g, err := user.LookupGroupId(u.Gid); err != nil || g.Name != "vigil" {
		t.Errorf("vigil's primary group: %v %v, want vigil", g, err)
	}
	if uid == 0 || uid >= 1000 {
		t.Errorf("vigil has uid %d, want a system uid (1-999)", uid)
	}
	if pw := run(t, "getent", "passwd", "vigil"); !strings.HasSuffix(strings.TrimSpace(pw), "nologin") {
		t.Errorf("vigil's passwd entry %q: want a nologin shell", pw)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/var/lib/vigil", &st); err != nil {
		t.Errorf("data dir: %v", err)
	} else if int(st.Uid) != uid || int(st.Gid) != gid || st.Mode&0o777 != 0o750 {
		t.Errorf("/var/lib/vigil: uid %d gid %d mode %o, want %d %d 750", st.Uid, st.Gid, st.Mode&0o777, uid, gid)
	}

	checkUnits(t)
	// The shipped configs are valid as they are.
	for _, f := range []string{"/etc/vigil/vigil.toml", "/etc/vigil/server.toml", "/etc/vigil/aggregator.toml"} {
		run(t, "/usr/bin/vigil", "check-config", f)
	}

	// The daemons as their units start them (without the sandbox, which
	// needs systemd as PID 1).
	body := runDaemon(t, uid, gid, "node_cpu_seconds_total{", "--listen",
		"/usr/bin/vigil-sampler", "--config", "/etc/vigil/vigil.toml")
	for _, m := range []string{"node_memory_MemAvailable_bytes", "node_load1", "node_timex_offset_seconds"} {
		if !bytes.Contains(body, []byte(m)) {
			t.Errorf("/metrics of the installed sampler has no %s", m)
		}
	}
	runDaemon(t, uid, gid, "vigil_", "--http",
		"/usr/bin/vigil", "server", "--config", "/etc/vigil/server.toml", "--data", "/var/lib/vigil")
	if ents, err := os.ReadDir("/var/lib/vigil"); err != nil || len(ents) == 0 {
		t.Errorf("/var/lib/vigil after the server ran as vigil: %v, %d entries", err, len(ents))
	}

	// vigil sample --once, the full binary's one collection, as vigil too.
	once := exec.Command("/usr/bin/vigil", "sample", "--once", "--config", "/etc/vigil/vigil.toml")
	once.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	once.Dir = "/"
	var stderr bytes.Buffer
	once.Stderr = &stderr
	out, err := once.Output()
	if err != nil || !bytes.Contains(out, []byte("node_cpu_seconds_total{")) {
		t.Errorf("vigil sample --once as vigil: %v, %d bytes of output, stderr %s", err, len(out), stderr.Bytes())
	}

	run(t, "dpkg", "--purge", "vigil", "vigil-sampler")
	for _, f := range append(append(slices.Clone(samplerFiles), vigilFiles...), "/etc/vigil") {
		if _, err := os.Lstat(f); !os.IsNotExist(err) {
			t.Errorf("%s after purge: %v, want it gone", f, err)
		}
	}
	for _, p := range []string{"vigil-sampler", "vigil"} {
		if installed(p) {
			t.Errorf("package %s still known to dpkg after purge", p)
		}
	}
	// The user stays (Debian practice for system users; see README).
	if _, err := user.Lookup("vigil"); err != nil {
		t.Errorf("user vigil after purge: %v, want it kept", err)
	}
}

// checkUnits checks the hardening every unit must have and, where
// systemd-analyze exists, that systemd accepts the units as installed.
func checkUnits(t *testing.T) {
	t.Helper()
	want := []string{"User=vigil", "Group=vigil", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"PrivateTmp=yes", "Restart=on-failure"}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Error(err)
			continue
		}
		lines := strings.Split(string(b), "\n")
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Errorf("%s: no line %q", u, w)
			}
		}
		caps, found := "", false
		for _, l := range lines {
			if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
				caps, found = v, true
			}
		}
		if !found {
			t.Errorf("%s: no CapabilityBoundingSet line", u)
		}
		// Only the server binds privileged ports (syslog 514/601).
		if wantCaps := map[bool]string{true: "CAP_NET_BIND_SERVICE", false: ""}[strings.HasSuffix(u, "server.service")]; caps != wantCaps {
			t.Errorf("%s: CapabilityBoundingSet=%s, want %q", u, caps, wantCaps)
		}
		// ProtectClock denies adjtimex(2), even read-only: the timex plugin's.
		if strings.HasSuffix(u, "sampler.service") && slices.Contains(lines, "ProtectClock=yes") {
			t.Errorf("%s: ProtectClock=yes would empty node_timex_*", u)
		}
		if strings.HasSuffix(u, "server.service") && !slices.Contains(lines, "ReadWritePaths=/var/lib/vigil") {
			t.Errorf("%s: the data directory is not writable", u)
		}
		// Only the aggregator reloads on SIGHUP; elsewhere it would kill.
		if reload := slices.Contains(lines, "ExecReload=/bin/kill -HUP $MAINPID"); reload != strings.HasSuffix(u, "aggregator.service") {
			t.Errorf("%s: ExecReload by SIGHUP %v, want it only on the aggregator", u, reload)
		}
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testutil.MissingPeer(t, "systemd-analyze not installed (apt-get install systemd)")
	}
	// Verify warns about unknown keys or bad values on stderr and may still
	// exit 0: any output is a failure.
	out, err := exec.Command(sa, append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// systemd's own exposure score (0 best, 10 worst) of each unit as
	// installed: 2.8 to 3.2 today; a weaker sandbox fails here.
	for _, u := range units {
		out, err := exec.Command(sa, "security", "--offline=true", "--threshold=35", "--no-pager", u).CombinedOutput()
		if err != nil {
			t.Errorf("systemd-analyze security %s: %v, want exposure at most 3.5\n%s", u, err, out)
		}
	}
}

// runDaemon runs an installed daemon as its unit does, as user vigil, with
// --http-style flag httpFlag on a free loopback port, until /metrics
// answers with want, then stops it with SIGTERM and expects exit 0.
func runDaemon(t *testing.T, uid, gid int, want string, httpFlag string, args ...string) []byte {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], append(args[1:], httpFlag, addr)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Dir = "/"
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var body []byte
	url := "http://" + addr + "/metrics"
	for body == nil {
		select {
		case err := <-done:
			t.Fatalf("%s exited before serving /metrics: %v\n%s", args[0], err, stderr.Bytes())
		case <-ctx.Done():
			t.Fatalf("%s did not serve %s on %s in time\n%s", args[0], want, addr, stderr.Bytes())
		case <-time.After(50 * time.Millisecond):
		}
		body = scrape(url, want)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("%s after SIGTERM: %v, want exit 0\n%s", args[0], err, stderr.Bytes())
	}
	return body
}

// scrape returns the /metrics body once it holds want, else nil.
func scrape(url, want string) []byte {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(want)) {
		return nil
	}
	return b
}

// TestRPMContents lists the .rpm packages and checks they hold the same
// files as the .debs, with the scripts that create the user.
func TestRPMContents(t *testing.T) {
	rpm := testutil.LookPeer(t, "rpm", "apt-get install rpm")
	for pkg, files := range map[string][]string{"vigil-sampler": samplerFiles, "vigil": vigilFiles} {
		m, _ := filepath.Glob(filepath.Join("..", "build", "packages", pkg+"-[0-9]*.rpm"))
		if len(m) != 1 {
			testutil.MissingPeer(t, "want one %s .rpm in build/packages, found %d: run make package", pkg, len(m))
		}
		list := strings.Fields(run(t, rpm, "-qpl", m[0]))
		for _, f := range files {
			if !slices.Contains(list, f) {
				t.Errorf("%s: no %s in %v", m[0], f, list)
			}
		}
		if cf := run(t, rpm, "-qpc", m[0]); !strings.Contains(cf, "/etc/vigil/") {
			t.Errorf("%s: config files %q, want /etc/vigil/*", m[0], cf)
		}
		if sc := run(t, rpm, "-qp", "--scripts", m[0]); !strings.Contains(sc, "useradd --system") {
			t.Errorf("%s: no useradd in the scripts:\n%s", m[0], sc)
		}
	}
}
