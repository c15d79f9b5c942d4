package cli

import (
	"context"
	"errors"
	"io"
)

// runJobReport is `vigil job report JOBID`; its body comes with the
// report (package jobs/report).
func runJobReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	_, _, _, _ = ctx, args, stdout, stderr
	return &ExitError{Code: 2, Err: errors.New("job report: not built yet")}
}
