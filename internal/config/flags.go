package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// FieldError is one invalid setting of a section, named by its TOML key.
// The file loader prefixes the section and adds the line; ParseFlags names
// the flag instead, so each rule is written once, in a Validate method.
type FieldError struct {
	Key string
	// Flag names the flag setting Key where it is not Key with '_'
	// replaced by '-'.
	Flag string
	Msg  string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

// Field returns a FieldError for key.
func Field(key, format string, args ...any) *FieldError {
	return &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// flagName is the flag that sets e's key.
func (e *FieldError) flagName() string {
	if e.Flag != "" {
		return e.Flag
	}
	return strings.ReplaceAll(e.Key, "_", "-")
}

// split returns the errors joined in err (errors.Join), flattened.
func split(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, split(e)...)
	}
	return out
}

// Daemon is what each daemon's settings implement: flags bound to the
// fields (defaults are the fields' values when registered) and the one
// place each rule lives.
type Daemon interface {
	RegisterFlags(fs *flag.FlagSet)
	Validate() error
}

// ParseFlags is the one way every daemon is configured: find --config in
// args, load that file (file:line errors; the defaults without one), let
// fromFile build the settings from it, register the flags with those
// values as defaults, parse args (so a flag given overrides the file,
// which overrides the defaults) and validate, naming the flag at fault.
// configUsage is the help text of --config.
func ParseFlags[C Daemon](fs *flag.FlagSet, args []string, configUsage string, fromFile func(*File) C) (C, error) {
	// A first, silent pass finds --config; errors and -h are left to the
	// real pass below, which prints them.
	probe := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	probe.SetOutput(io.Discard)
	path := probe.String("config", "", "")
	fromFile(Defaults()).RegisterFlags(probe)
	file := Defaults()
	if probe.Parse(args) == nil && *path != "" {
		f, err := Load(*path)
		if err != nil {
			var zero C
			return zero, err
		}
		file = f
	}
	c := fromFile(file)
	fs.String("config", "", configUsage)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := c.Validate(); err != nil {
		return c, FlagErrors(fs, err)
	}
	return c, nil
}

// FlagErrors rewrites the FieldErrors in err to name their flags in fs.
func FlagErrors(fs *flag.FlagSet, err error) error {
	var out []error
	for _, e := range split(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			if fl := fs.Lookup(fe.flagName()); fl != nil {
				e = fmt.Errorf("--%s: %s", fl.Name, fe.Msg)
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// List is a flag.Value for a list setting: a comma-separated value replaces
// the file's list, and repeating the flag adds to it.
type List struct {
	p   *[]string
	set bool
}

// NewList binds a List flag to p.
func NewList(p *[]string) *List { return &List{p: p} }

func (l *List) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

// Set parses one occurrence of the flag.
func (l *List) Set(s string) error {
	if !l.set {
		*l.p = nil
		l.set = true
	}
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.p = append(*l.p, v)
		}
	}
	return nil
}
