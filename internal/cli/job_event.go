package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

func init() {
	register(Command{Name: "job-event", Summary: "tell the server a Slurm job started or ended (from a prolog or epilog)", Run: runJobEvent})
}

// jobEventEnv maps the form fields to the variables Slurm's prologs and
// epilogs get (slurm.schedmd.com/prolog_epilog.html).
var jobEventEnv = []struct{ field, env string }{
	{"user", "SLURM_JOB_USER"}, {"account", "SLURM_JOB_ACCOUNT"}, {"partition", "SLURM_JOB_PARTITION"},
	{"name", "SLURM_JOB_NAME"}, {"nodes", "SLURM_JOB_NODELIST"},
}

// runJobEvent posts a job's start or end. Failures are said on stderr but
// exit 0 unless --strict: a prolog that fails drains the node.
func runJobEvent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil job-event", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := serverFlag(fs)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	strict := fs.Bool("strict", false, "exit 1 when the server cannot be told (a failing prolog drains its node)")
	httpConfig := httpConfigFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vigil job-event start|end [--server URL] [--strict]\n\nReads SLURM_JOB_ID, SLURM_JOB_USER, SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION,\nSLURM_JOB_NAME, SLURM_JOB_NODELIST, SLURM_JOB_CPUS_PER_NODE,\nSLURM_JOB_START_TIME/END_TIME (newer Slurm) and (end) SLURM_JOB_EXIT_CODE2 or SLURM_JOB_EXIT_CODE.\n\nFlags:")
		fs.PrintDefaults()
	}
	var event string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if event != "" {
			return &ExitError{Code: 2, Err: fmt.Errorf("more than one event: %q and %q", event, fs.Arg(0))}
		}
		event, args = fs.Arg(0), fs.Args()[1:]
	}
	if event != "start" && event != "end" {
		fs.Usage()
		return &ExitError{Code: 2, Err: errors.New("want start or end")}
	}
	id := os.Getenv("SLURM_JOB_ID")
	if !jobs.ValidID(id) {
		return &ExitError{Code: 2, Err: fmt.Errorf("SLURM_JOB_ID %.70q: not a job id (run from a Slurm prolog or epilog)", id)}
	}
	form := url.Values{"event": {event}, "time": {strconv.FormatFloat(float64(time.Now().UnixMilli())/1e3, 'f', 3, 64)}}
	for _, e := range jobEventEnv {
		if v := os.Getenv(e.env); v != "" {
			form.Set(e.field, v)
		}
	}
	// 22.05's prologs give the CPUs per node, not the memory or the time
	// limit (the --slurm poller fills those); newer slurmd prologs give
	// the start and end times, whose difference is the limit.
	if n, ok := cpusPerNode(os.Getenv("SLURM_JOB_CPUS_PER_NODE")); ok {
		form.Set("cpus", strconv.Itoa(n))
	}
	if lim, ok := timeLimit(os.Getenv("SLURM_JOB_START_TIME"), os.Getenv("SLURM_JOB_END_TIME")); ok {
		form.Set("time_limit", strconv.FormatInt(lim, 10))
	}
	if event == "end" {
		// EXIT_CODE2 is "exit:signal"; EXIT_CODE a wait(2) status.
		if c := os.Getenv("SLURM_JOB_EXIT_CODE2"); c != "" {
			form.Set("exit_code", c)
		} else if st, err := strconv.Atoi(os.Getenv("SLURM_JOB_EXIT_CODE")); err == nil && st >= 0 {
			form.Set("exit_code", fmt.Sprintf("%d:%d", st>>8&0xff, st&0x7f))
		}
	}
	err := postJobEvent(ctx, *server, *httpConfig, *timeout, id, form)
	if err != nil && !*strict {
		fmt.Fprintf(stderr, "vigil job-event: job %s %s not told: %v\n", id, event, err)
		return nil
	}
	return err
}

func postJobEvent(ctx context.Context, server, httpConfig string, timeout time.Duration, id string, form url.Values) error {
	c, err := newAPIClient(server, httpConfig, timeout)
	if err != nil {
		return err
	}
	_, err = c.Post(ctx, "/api/v1/jobs/"+url.PathEscape(id)+"/event", form)
	return err
}

// cpusPerNode sums Slurm's compressed CPU list, "4(x2),2" = 10.
func cpusPerNode(s string) (int, bool) {
	if s == "" || len(s) > 4096 {
		return 0, false
	}
	total := 0
	for part := range strings.SplitSeq(s, ",") {
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return 0, false
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(rep)
		if err1 != nil || err2 != nil || c < 0 || r < 1 || c > 1<<20 || r > 1<<20 {
			return 0, false
		}
		total += c * r
		if total > 1<<24 {
			return 0, false
		}
	}
	return total, true
}

// timeLimit is end − start in seconds, from two Unix times.
func timeLimit(start, end string) (int64, bool) {
	s, err1 := strconv.ParseInt(start, 10, 64)
	e, err2 := strconv.ParseInt(end, 10, 64)
	if err1 != nil || err2 != nil || s <= 0 || e <= s || e-s > 1e9 {
		return 0, false
	}
	return e - s, true
}
