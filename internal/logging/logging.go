// Package logging builds the process logger of every Vigil daemon from
// the same two flags, --log-level and --log-format.
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Options select the logger's level and format.
type Options struct {
	Level  string // debug, info, warn or error
	Format string // logfmt or json
}

// RegisterFlags adds --log-level and --log-format, with o's values as
// defaults ("info" and "logfmt" where empty).
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	if o.Level == "" {
		o.Level = "info"
	}
	if o.Format == "" {
		o.Format = "logfmt"
	}
	fs.StringVar(&o.Level, "log-level", o.Level, "debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", o.Format, "logfmt or json")
}

// Validate checks the level and format.
func (o Options) Validate() error {
	_, err := o.handlerOptions()
	if err == nil && o.Format != "" && o.Format != "logfmt" && o.Format != "json" {
		err = fmt.Errorf("--log-format %q: want logfmt or json", o.Format)
	}
	return err
}

func (o Options) handlerOptions() (*slog.HandlerOptions, error) {
	var l slog.Level
	if o.Level != "" {
		if err := l.UnmarshalText([]byte(o.Level)); err != nil {
			return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.Level)
		}
	}
	return &slog.HandlerOptions{Level: l}, nil
}

// New builds a logger writing to w.
func New(w io.Writer, o Options) (*slog.Logger, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ho, _ := o.handlerOptions()
	if o.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return slog.New(slog.NewTextHandler(w, ho)), nil
}

// OnChange logs a recurring error once per kind: Warn logs err when its
// text differs from the last one logged, and a nil err forgets it, so the
// next failure is logged again. Not safe for concurrent use.
type OnChange struct{ last string }

// Warn logs msg with err at warning level if err is new.
func (o *OnChange) Warn(log *slog.Logger, msg string, err error) {
	if err == nil {
		o.last = ""
		return
	}
	if s := err.Error(); s != o.last {
		o.last = s
		log.Warn(msg, "err", err)
	}
}
