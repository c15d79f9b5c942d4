package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/pattern"
	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// logsSub is one "vigil logs" subcommand. Subcommands in other files add
// themselves to logsSubs from their init functions (the map literal is
// initialised before any init runs).
type logsSub struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var logsSubs = map[string]logsSub{
	"mine": {summary: "mine templates from messages on stdin, print one template per line", run: runLogsMine},
}

func init() {
	register(Command{Name: "logs", Summary: "log tools (vigil logs help lists them)", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return runLogs(ctx, args, os.Stdin, stdout, stderr)
	}})
}

func runLogs(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		logsUsage(stderr)
		if len(args) == 0 {
			return &ExitError{Code: 2, Err: errors.New("")}
		}
		return nil
	}
	sub, ok := logsSubs[args[0]]
	if !ok {
		logsUsage(stderr)
		return &ExitError{Code: 2, Err: fmt.Errorf("unknown subcommand %q", args[0])}
	}
	return sub.run(ctx, args[1:], stdin, stdout, stderr)
}

func logsUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: vigil logs SUBCOMMAND [flags]\n\nSubcommands:")
	names := make([]string, 0, len(logsSubs))
	for n := range logsSubs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, logsSubs[n].summary)
	}
}

// runLogsMine feeds every line of stdin to one miner, then prints each
// line's final template: templates generalise as lines arrive, so printing
// as we go would give the early lines of an event a narrower template.
func runLogsMine(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("logs mine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxPatterns := fs.Int("max-patterns", 1<<20, "bound on live patterns (least recently used evicted)")
	maxLine := fs.Int("max-line-bytes", 64<<10, "mine only the first `N` bytes of longer lines")
	sim := fs.Float64("similarity", 0, "share of equal tokens to join a pattern (0: miner default)")
	variants := fs.Int("min-variants", 0, "different words at one position that make it a variable (0: miner default)")
	header := fs.Bool("strip-header", true, "mine \"app: message\" of lines with a syslog header (<PRI>, RFC 5424, or a log file's \"Mmm dd hh:mm:ss host app[pid]:\"), as the server does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if *maxLine <= 0 {
		return &ExitError{Code: 2, Err: errors.New("-max-line-bytes must be positive")}
	}
	m := pattern.New(pattern.Config{MaxPatterns: *maxPatterns, Similarity: *sim, MinVariants: *variants, MaxExamples: -1})
	r := bufio.NewReaderSize(stdin, 256<<10)
	var ids []uint64
	var long []byte // assembles lines longer than the reader's buffer
	var msg syslog.Message
	var scratch []byte
	for n := 0; ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				if len(long) < *maxLine {
					long = append(long, line...)
				}
			}
			line = long
		}
		if len(line) == 0 && err != nil {
			if err == io.EOF {
				break
			}
			return fmt.Errorf("read stdin: %w", err)
		}
		line = trimEOL(line)
		if len(line) > *maxLine {
			line = line[:*maxLine]
		}
		if *header {
			line = stripHeader(line, &msg, &scratch)
		}
		id, _ := m.Add(line)
		ids = append(ids, id)
		if err != nil {
			if err == io.EOF {
				break
			}
			return fmt.Errorf("read stdin: %w", err)
		}
	}
	m.Merge()
	w := bufio.NewWriterSize(stdout, 256<<10)
	cache := make(map[uint64]string)
	for _, id := range ids {
		t, ok := cache[id]
		if !ok {
			if t, ok = m.Template(id); !ok {
				t = "<evicted>"
			}
			t = strings.ReplaceAll(t, "\n", " ")
			cache[id] = t
		}
		w.WriteString(t)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// stripHeader returns "app: text" of a line with a syslog header, which
// is what the server mines, and any other line as it is: a log file's
// timestamps and host names would otherwise be mined as variables. A
// header is there when the line starts with a PRI or with a timestamp
// ("Jan  5 09:59:58", "2026-01-05T09:59:58Z") the syslog parser accepts.
func stripHeader(line []byte, m *syslog.Message, scratch *[]byte) []byte {
	if !mayHaveHeader(line) {
		return line
	}
	syslog.Parse(line, time.Time{}, time.UTC, m)
	if m.Malformed || (line[0] != '<' && m.Time.IsZero()) {
		return line
	}
	b := (*scratch)[:0]
	if m.App != "" {
		b = append(append(b, m.App...), ": "...)
	}
	b = append(b, m.Text...)
	*scratch = b
	return b
}

// mayHaveHeader is a quick test for the start of a syslog header: "<",
// a month name and a blank, or a date.
func mayHaveHeader(b []byte) bool {
	if len(b) < 16 {
		return false
	}
	if b[0] == '<' {
		return true
	}
	if b[3] == ' ' && strings.Contains("JanFebMarAprMayJunJulAugSepOctNovDec", string(b[:3])) {
		return true
	}
	for _, c := range b[:4] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return b[4] == '-'
}
