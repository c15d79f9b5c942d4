package cli

import (
	"context"
	"errors"
	"io"

	"github.com/vigil-hpc/vigil/internal/alerting"
)

func init() {
	register(Command{Name: "check-rules", Summary: "validate Prometheus rule files as promtool check rules does", Run: checkRules})
}

// checkRules is `vigil check-rules FILE...`: exit 0 when every file is
// valid, 1 with FILE: LINE:COL: errors otherwise (as promtool check rules).
func checkRules(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &ExitError{Code: 2, Err: errors.New("usage: vigil check-rules FILE [FILE ...]")}
	}
	if !alerting.CheckFiles(stdout, stderr, args) {
		return &ExitError{Code: 1, Err: errors.New("")}
	}
	return nil
}
