package syslog_test

import (
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

func ExampleParse() {
	var m syslog.Message
	recv := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	syslog.Parse([]byte("<11>Jan  5 09:59:58 cn0042 slurmd[77]: error: job 1011 exceeded memory limit\n"), recv, time.UTC, &m)
	fmt.Println(m.Time.Format(time.RFC3339), m.Host, m.App, m.ProcID, syslog.SeverityName(m.Severity), m.Facility)
	fmt.Println(m.Text)
	// Output:
	// 2026-01-05T09:59:58Z cn0042 slurmd 77 err 1
	// error: job 1011 exceeded memory limit
}
