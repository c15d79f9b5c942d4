package alerting

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
)

// Bounds on what the rule files may hold: far beyond real rule sets, so
// a wrong glob or a generated monster fails with an error, not the server.
const (
	maxFiles    = 10_000
	maxFileSize = 32 << 20
)

// expand turns the patterns into files, each once, sorted. A name without
// glob characters must exist; a glob may match nothing (as in Prometheus).
func expand(patterns []string) ([]string, error) {
	seen := map[string]bool{}
	var files []string
	for _, p := range patterns {
		if !strings.ContainsAny(p, "*?[") {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("rule file: %w", err)
			}
		}
		ms, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("rule files %q: %w", p, err)
		}
		for _, f := range ms {
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
		if len(files) > maxFiles {
			return nil, fmt.Errorf("rule files %q: more than %d files", p, maxFiles)
		}
	}
	sort.Strings(files)
	return files, nil
}

// parseFile parses and checks one rule file as Prometheus does (YAML,
// expressions, templates); errors start with "FILE: LINE:COL:" where the
// parser knows the place.
func parseFile(name string) (*rulefmt.RuleGroups, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxFileSize)
	}
	rgs, errs := rulefmt.Parse(b, false, model.UTF8Validation)
	for i := range errs {
		errs[i] = fmt.Errorf("%s: %w", name, errs[i])
	}
	return rgs, errors.Join(errs...)
}

// CheckFiles checks rule files as `promtool check rules` does, writing
// its report as it does: for each file "Checking FILE" then "  SUCCESS:
// N rules found" on w, or "  FAILED:" and the errors on errw. It reports
// whether all passed.
func CheckFiles(w, errw io.Writer, files []string) bool {
	ok := true
	for _, name := range files {
		fmt.Fprintf(w, "Checking %s\n", name)
		rgs, err := parseFile(name)
		if err != nil {
			ok = false
			fmt.Fprintf(errw, "  FAILED:\n%s\n\n", err)
			continue
		}
		n := 0
		for _, g := range rgs.Groups {
			n += len(g.Rules)
		}
		fmt.Fprintf(w, "  SUCCESS: %d rules found\n\n", n)
	}
	return ok
}
