package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// checkRulesCases are rule files, each valid or not; want is the exit
// status both vigil check-rules and promtool check rules give.
var checkRulesCases = []struct {
	name, body string
	want       int
}{
	{"good", "groups:\n- name: g\n  rules:\n  - alert: NodeDown\n    expr: up == 0\n    for: 1m\n    labels: {severity: critical}\n    annotations: {summary: \"{{ $labels.node }} down\"}\n  - record: node:up:sum\n    expr: sum by (node) (up)\n", 0},
	{"empty", "", 0},
	{"bad-expr", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up ==\n", 1},
	{"bad-yaml", "groups:\n- name: g\n  rules:\n  - alert: A\n   expr: up\n", 1},
	{"unknown-field", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    severity: high\n", 1},
	{"duplicate-group", "groups:\n- name: g\n  rules:\n  - record: a:b\n    expr: up\n- name: g\n  rules:\n  - record: a:c\n    expr: up\n", 1},
	{"bad-template", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    annotations: {summary: \"{{ $labels.node \"}\n", 1},
	{"no-expr", "groups:\n- name: g\n  rules:\n  - alert: A\n", 1},
	{"both-kinds", "groups:\n- name: g\n  rules:\n  - alert: A\n    record: a:b\n    expr: up\n", 1},
	{"bad-for", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    for: soon\n", 1},
}

func writeRuleCases(t *testing.T) string {
	dir := t.TempDir()
	for _, c := range checkRulesCases {
		if err := os.WriteFile(filepath.Join(dir, c.name+".yml"), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func exitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestCheckRules: valid files pass, each kind of mistake fails with the
// file and line:column where the parser knows them.
func TestCheckRules(t *testing.T) {
	dir := writeRuleCases(t)
	for _, c := range checkRulesCases {
		f := filepath.Join(dir, c.name+".yml")
		var out, errb bytes.Buffer
		if got := exitCode(checkRules(context.Background(), []string{f}, &out, &errb)); got != c.want {
			t.Errorf("%s: exit %d, want %d (%s%s)", c.name, got, c.want, out.String(), errb.String())
		}
		if c.want == 1 && !strings.Contains(errb.String(), f+": ") {
			t.Errorf("%s: error does not name the file: %s", c.name, errb.String())
		}
	}
	var out, errb bytes.Buffer
	checkRules(context.Background(), []string{filepath.Join(dir, "bad-expr.yml")}, &out, &errb)
	if !strings.Contains(errb.String(), "bad-expr.yml: 5:11: ") {
		t.Errorf("no line:column in %q", errb.String())
	}
	if got := exitCode(checkRules(context.Background(), nil, &out, &errb)); got != 2 {
		t.Errorf("no files: exit %d, want 2", got)
	}
}

// TestCheckRulesAgreesWithPromtool: promtool check rules gives the same
// verdict on every case, and the same report on stdout for valid files.
func TestCheckRulesAgreesWithPromtool(t *testing.T) {
	promtool := testutil.LookPeer(t, "promtool", "apt-get install prometheus")
	dir := writeRuleCases(t)
	for _, c := range checkRulesCases {
		f := filepath.Join(dir, c.name+".yml")
		cmd := exec.Command(promtool, "check", "rules", f)
		var pout bytes.Buffer
		cmd.Stdout = &pout
		err := cmd.Run()
		pcode := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			pcode = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		vcode := exitCode(checkRules(context.Background(), []string{f}, &out, &errb))
		if vcode != pcode {
			t.Errorf("%s: vigil exit %d, promtool %d", c.name, vcode, pcode)
		}
		if pcode == 0 && out.String() != pout.String() {
			t.Errorf("%s: vigil says %q, promtool %q", c.name, out.String(), pout.String())
		}
	}
}
