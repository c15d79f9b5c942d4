// Package config decodes and validates vigil.toml strictly: unknown keys,
// wrong types and invalid values are errors that name file and line.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/pelletier/go-toml/v2"

	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

// Sampler is the [sampler] table.
type Sampler struct {
	Node     string            `toml:"node"`
	Root     string            `toml:"root"`
	Interval duration.Duration `toml:"interval"`
	Offset   duration.Duration `toml:"offset"`
	Listen   string            `toml:"listen"`
	Plugins  []string          `toml:"plugins"`
	Upstream []string          `toml:"upstream"`
	// UpstreamDelay: a group whose ticks come at most this far apart
	// sends them upstream two to a write (wire.ClientOptions.Coalesce).
	UpstreamDelay duration.Duration `toml:"upstream_delay"`
}

// DefaultUpstreamDelay pairs the writes of groups at 4 Hz and faster, and
// writes every tick at once at 1 Hz (docs/benchmarks.md, "Coalesced writes").
const DefaultUpstreamDelay = 250 * time.Millisecond

// MaxUpstreamDelay bounds how long a tick may wait: one interval of its
// group, at most this.
const MaxUpstreamDelay = time.Second

// Aggregator is the [aggregator] table.
type Aggregator struct {
	Name         string            `toml:"name"`
	Listen       string            `toml:"listen"`
	Upstream     []string          `toml:"upstream"`
	HTTP         string            `toml:"http"`
	Key          string            `toml:"key"`
	Interval     duration.Duration `toml:"interval"`
	Children     []string          `toml:"children"`
	ChildrenFile string            `toml:"children_file"`
	BufferBytes  int               `toml:"buffer_bytes"`
	DebugPprof   bool              `toml:"debug_pprof"`
	CheckValues  bool              `toml:"check_values"`
	WireLimits
}

// sections holds the tables other packages own (e.g. [server]), registered
// from their init functions; read-only afterwards.
var sections = map[string]func() any{}

// RegisterSection lets a package own a top-level table: newDefault returns
// a pointer to a struct with defaults, decoded strictly; if it implements
// Validate() error, that is called too.
func RegisterSection(name string, newDefault func() any) { sections[name] = newDefault }

// reserved tables belong to daemons that may not be linked into this
// binary (the lean sampler); they are accepted unvalidated unless their
// owner registered them.
var reserved = []string{"server", "logs", "web", "alerts", "export", "amqp"}

// File is a decoded configuration file.
type File struct {
	Name       string
	Sampler    Sampler
	Aggregator Aggregator
	// Sections holds registered tables by name (pointers as registered).
	Sections map[string]any
	// Plugins maps every registered plugin name to its config (defaults
	// where the file says nothing).
	Plugins map[string]sampler.Configurable
	// set records which [plugins.X] tables the file contains.
	set map[string]bool
}

// PluginSet reports whether the file has a [plugins.NAME] table.
func (f *File) PluginSet(name string) bool { return f.set[name] }

// Defaults returns the configuration used when no file is given.
func Defaults() *File {
	f, err := Parse("(defaults)", nil)
	if err != nil {
		panic(err) // the registry's own defaults are invalid: a programming error
	}
	return f
}

// Load reads and parses a file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Error is a configuration error at a position in a file.
type Error struct {
	File   string
	Line   int
	Column int
	Msg    string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Errors is a list of configuration errors, reported together.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Parse decodes data (named name in errors) and validates it.
func Parse(name string, data []byte) (*File, error) {
	names := sampler.Names()
	pluginFields := make([]reflect.StructField, 0, len(names))
	defaults := make([]sampler.Configurable, len(names))
	for i, n := range names {
		reg, _ := sampler.Lookup(n)
		defaults[i] = reg.NewConfig()
		pluginFields = append(pluginFields, reflect.StructField{
			Name: fieldName(i),
			Type: reflect.TypeOf(defaults[i]),
			Tag:  reflect.StructTag(fmt.Sprintf(`toml:%q`, n)),
		})
	}
	pluginsT := reflect.StructOf(pluginFields)
	topFields := []reflect.StructField{
		{Name: "Sampler", Type: reflect.TypeOf(&Sampler{}), Tag: `toml:"sampler"`},
		{Name: "Plugins", Type: reflect.PointerTo(pluginsT), Tag: `toml:"plugins"`},
		{Name: "Aggregator", Type: reflect.TypeOf(&Aggregator{}), Tag: `toml:"aggregator"`},
	}
	secNames := make([]string, 0, len(sections)+len(reserved))
	secVals := map[string]any{}
	for n, mk := range sections {
		secNames = append(secNames, n)
		secVals[n] = mk()
	}
	for _, n := range reserved {
		if _, ok := sections[n]; !ok {
			secNames = append(secNames, n)
			secVals[n] = &map[string]any{}
		}
	}
	for i, n := range secNames {
		topFields = append(topFields, reflect.StructField{
			Name: fmt.Sprintf("S%d", i), Type: reflect.TypeOf(secVals[n]), Tag: reflect.StructTag(fmt.Sprintf(`toml:%q`, n)),
		})
	}
	topT := reflect.StructOf(topFields)
	top := reflect.New(topT)
	samp := &Sampler{Interval: duration.Duration(time.Second), UpstreamDelay: duration.Duration(DefaultUpstreamDelay)}
	top.Elem().Field(0).Set(reflect.ValueOf(samp))
	plugins := reflect.New(pluginsT)
	for i := range defaults {
		plugins.Elem().Field(i).Set(reflect.ValueOf(defaults[i]))
	}
	top.Elem().Field(1).Set(plugins)
	agg := &Aggregator{Interval: duration.Duration(time.Second)}
	top.Elem().Field(2).Set(reflect.ValueOf(agg))
	for i, n := range secNames {
		top.Elem().Field(3 + i).Set(reflect.ValueOf(secVals[n]))
	}

	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(top.Interface()); err != nil {
		return nil, decodeError(name, err)
	}
	f := &File{Name: name, Sampler: *samp, Aggregator: *agg, Sections: map[string]any{},
		Plugins: map[string]sampler.Configurable{}, set: map[string]bool{}}
	for i, n := range secNames {
		if _, ok := sections[n]; ok {
			f.Sections[n] = top.Elem().Field(3 + i).Interface()
		}
	}
	// The decoder may have replaced pointers; read them back.
	pv := top.Elem().Field(1)
	for i, n := range names {
		if !pv.IsNil() {
			f.Plugins[n] = pv.Elem().Field(i).Interface().(sampler.Configurable)
		} else {
			f.Plugins[n] = defaults[i]
		}
	}
	for _, t := range tablesIn(data, "plugins.") {
		f.set[t] = true
	}
	if errs := f.validate(data); len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

func fieldName(i int) string { return fmt.Sprintf("P%d", i) }

func decodeError(name string, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		var errs Errors
		for _, de := range sm.Errors {
			row, col := de.Position()
			errs = append(errs, &Error{File: name, Line: row, Column: col,
				Msg: fmt.Sprintf("unknown key %q", strings.Join(de.Key(), "."))})
		}
		return errs
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := friendlyTypeError(de.Error())
		if k := de.Key(); len(k) > 0 {
			msg = fmt.Sprintf("%s: %s", strings.Join(k, "."), msg)
		}
		return Errors{{File: name, Line: row, Column: col, Msg: msg}}
	}
	// Type mismatches and errors from UnmarshalText carry no position in
	// go-toml; find the key named in the message if we can.
	msg := err.Error()
	line := 0
	if i := strings.Index(msg, "toml: cannot"); i >= 0 {
		msg = msg[i+len("toml: "):]
	}
	return Errors{{File: name, Line: line, Msg: msg}}
}

func (f *File) validate(data []byte) Errors {
	var errs Errors
	add := func(table, key, format string, args ...any) {
		errs = append(errs, &Error{File: f.Name, Line: lineOf(data, table, key), Msg: fmt.Sprintf(format, args...)})
	}
	// section adds the errors of a section's Validate, at the line of the
	// key each names (of the table header otherwise).
	section := func(table string, err error) {
		if err == nil {
			return
		}
		for _, e := range split(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				k := fe.Key
				if lineOf(data, table, k) == 0 {
					k = "" // e.g. an entry of an array of tables: its header
				}
				add(table, k, "%s.%s: %s", table, fe.Key, fe.Msg)
			} else {
				add(table, "", "%s: %v", table, e)
			}
		}
	}
	section("sampler", f.Sampler.Validate())
	section("aggregator", f.Aggregator.Validate())
	for n, v := range f.Sections {
		if val, ok := v.(interface{ Validate() error }); ok {
			section(n, val.Validate())
		}
	}
	for _, n := range sampler.Names() {
		c := f.Plugins[n].CommonConfig()
		if c.Interval != 0 && c.Interval.D() < time.Millisecond {
			add("plugins."+n, "interval", "plugins.%s.interval: must be at least 1ms, got %s", n, c.Interval.D())
		}
		if v, ok := f.Plugins[n].(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				add("plugins."+n, "", "plugins.%s: %v", n, err)
			}
		}
	}
	return errs
}

// Validate checks the [sampler] settings, from the file or flags.
func (s *Sampler) Validate() error {
	var errs []error
	if s.Interval.D() < time.Millisecond {
		errs = append(errs, Field("interval", "must be at least 1ms, got %s", s.Interval.D()))
	}
	if s.Node != "" && !validNode(s.Node) {
		errs = append(errs, Field("node", "%q: want letters, digits, '-', '_' or '.'", s.Node))
	}
	if s.Listen != "" && s.Listen != "none" {
		if _, _, err := net.SplitHostPort(s.Listen); err != nil {
			errs = append(errs, Field("listen", "%q: want host:port (e.g. \":9100\") or \"none\"", s.Listen))
		}
	}
	for _, u := range s.Upstream {
		if _, _, err := net.SplitHostPort(u); err != nil {
			errs = append(errs, Field("upstream", "%q: want host:port", u))
		}
	}
	if d := s.UpstreamDelay.D(); d < 0 || d > MaxUpstreamDelay {
		errs = append(errs, Field("upstream_delay", "must be between 0s and %s, got %s", MaxUpstreamDelay, d))
	}
	seen := map[string]bool{}
	for _, p := range s.Plugins {
		if _, ok := sampler.Lookup(p); !ok {
			errs = append(errs, Field("plugins", "unknown plugin %q (known: %s)", p, strings.Join(sampler.Names(), ", ")))
		}
		if seen[p] {
			errs = append(errs, Field("plugins", "%q listed twice", p))
		}
		seen[p] = true
	}
	return errors.Join(errs...)
}

// Validate checks the [aggregator] settings, from the file or flags.
func (a *Aggregator) Validate() error {
	var errs []error
	for _, kv := range []struct{ key, v string }{{"listen", a.Listen}, {"http", a.HTTP}} {
		if kv.v != "" && kv.v != "none" {
			if _, _, err := net.SplitHostPort(kv.v); err != nil {
				errs = append(errs, Field(kv.key, "%q: want host:port", kv.v))
			}
		}
	}
	for _, u := range a.Upstream {
		if _, _, err := net.SplitHostPort(u); err != nil {
			errs = append(errs, Field("upstream", "%q: want host:port", u))
		}
	}
	if a.Interval.D() < time.Millisecond {
		errs = append(errs, Field("interval", "must be at least 1ms, got %s", a.Interval.D()))
	}
	if a.BufferBytes < 0 {
		errs = append(errs, Field("buffer_bytes", "must not be negative"))
	}
	errs = append(errs, a.WireLimits.Validate())
	return errors.Join(errs...)
}

func validNode(s string) bool {
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// lineOf finds the line of key inside [table] (or of the table header when
// key is empty), for errors found after decoding. 0 if not found.
func lineOf(data []byte, table, key string) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	cur := ""
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "[") {
			cur = strings.Trim(strings.TrimSpace(strings.SplitN(l, "#", 2)[0]), "[] ")
			if key == "" && cur == table {
				return n
			}
			continue
		}
		if cur == table && key != "" {
			if k, _, ok := strings.Cut(l, "="); ok && strings.Trim(strings.TrimSpace(k), `"`) == key {
				return n
			}
		}
	}
	return 0
}

// tablesIn lists names of [prefix.NAME] tables present in data.
func tablesIn(data []byte, prefix string) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "[") {
			t := strings.Trim(strings.TrimSpace(strings.SplitN(l, "#", 2)[0]), "[] ")
			if rest, ok := strings.CutPrefix(t, prefix); ok {
				out = append(out, strings.SplitN(rest, ".", 2)[0])
			}
		}
	}
	return out
}

// typeErrorRE matches go-toml's type mismatch text, which names Go types
// an admin cannot act on.
var typeErrorRE = regexp.MustCompile(`cannot decode TOML (\w+) into .* of type (\S+)$`)

// friendlyTypeError rewrites a type mismatch as "want X, got a TOML Y".
func friendlyTypeError(msg string) string {
	m := typeErrorRE.FindStringSubmatch(msg)
	if m == nil {
		return strings.TrimPrefix(msg, "toml: ")
	}
	got, goType := m[1], m[2]
	want := "a value of type " + goType
	switch {
	case strings.HasPrefix(goType, "[]"):
		want = "an array"
	case strings.HasPrefix(goType, "map[") || strings.Contains(goType, "Config") || strings.Contains(goType, "struct"):
		want = "a table"
	case goType == "string":
		want = "a string"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		want = "an integer"
	case goType == "bool":
		want = "true or false"
	case strings.HasPrefix(goType, "float"):
		want = "a number"
	case strings.HasSuffix(goType, "Duration"):
		want = `a duration string such as "1s"`
	}
	return fmt.Sprintf("want %s, got a TOML %s", want, got)
}
