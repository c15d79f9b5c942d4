package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServerRules: --rules loads the files into /api/v1/rules; POST
// /-/reload with a bad file answers 500 with file:line and keeps the old
// rules; SIGHUP loads the fixed file.
func TestServerRules(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.rules.yml")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("groups:\n- name: g\n  rules:\n  - alert: NodeDown\n    expr: up == 0\n")
	_, srv, _ := startServerStream(t, false, func(c *Config) {
		c.Rules = &[]string{filepath.Join(dir, "*.yml")}
		c.RuleInterval = Duration(100 * time.Millisecond)
	})
	ruleNames := func() []string {
		resp, err := http.Get(srv + "/api/v1/rules")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Data struct {
				Groups []struct {
					Rules []struct{ Name string }
				}
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, g := range v.Data.Groups {
			for _, r := range g.Rules {
				names = append(names, r.Name)
			}
		}
		return names
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	poll("the rule loaded", func() bool { return strings.Join(ruleNames(), ",") == "NodeDown" })

	write("groups:\n- name: g\n  rules:\n  - alert: NodeDown\n    expr: up ==\n")
	resp, err := http.Post(srv+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), file+": 5:11:") {
		t.Errorf("reload of a bad file: %d %s", resp.StatusCode, b)
	}
	if n := strings.Join(ruleNames(), ","); n != "NodeDown" {
		t.Errorf("rules after a bad reload: %s", n)
	}

	write("groups:\n- name: g\n  rules:\n  - alert: NodeDown\n    expr: up == 0\n  - record: up:sum\n    expr: sum(up)\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll("SIGHUP to load the fixed file", func() bool { return strings.Join(ruleNames(), ",") == "NodeDown,up:sum" })
}

// TestRulesFlags: rules, alertmanager and rule_interval from the file,
// the flags (repeated or comma lists) replacing the file's lists.
func TestRulesFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(file, []byte("[server]\nrules = [\"/etc/a.yml\", \"/etc/r/*.yml\"]\nalertmanager = [\"http://am1:9093\"]\nrule_interval = \"30s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseFlags([]string{"--config", file})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(list(c.Rules), " ") != "/etc/a.yml /etc/r/*.yml" || strings.Join(list(c.Alertmanager), " ") != "http://am1:9093" || c.RuleInterval.D() != 30*time.Second {
		t.Errorf("from the file: %v %v %v", list(c.Rules), list(c.Alertmanager), c.RuleInterval)
	}
	c, err = parseFlags([]string{"--config", file, "--rules", "x.yml,y.yml", "--rules", "z.yml", "--alertmanager", "http://a:1", "--alertmanager", "http://b:2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(list(c.Rules), " ") != "x.yml y.yml z.yml" || strings.Join(list(c.Alertmanager), " ") != "http://a:1 http://b:2" {
		t.Errorf("flags: %v %v", list(c.Rules), list(c.Alertmanager))
	}
	if d := DefaultConfig(); d.Rules != nil || d.RuleInterval != 0 {
		t.Errorf("defaults %v %v", d.Rules, d.RuleInterval)
	}
	if _, err := parseFlags([]string{"--alertmanager", "am1:9093"}); err == nil || !strings.Contains(err.Error(), "--alertmanager: ") {
		t.Errorf("--alertmanager without scheme: %v", err)
	}
	if _, err := parseFlags([]string{"--rule-interval", "-1s"}); err == nil {
		t.Errorf("negative --rule-interval accepted")
	}
}
