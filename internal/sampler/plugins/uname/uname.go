// Package uname exports node_uname_info (node_exporter's uname collector),
// the series Grafana's node dashboards pick hosts by.
package uname

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "uname",
		Description:  "node_uname_info from uname(2) or /proc/sys/kernel",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Uname{} },
		SampleConfig: sampleConfig,
	})
}

// Field indexes, in node_exporter's label order.
const (
	Domainname = iota
	Machine
	Nodename
	Release
	Sysname
	Version
	NumFields
)

// files are the /proc/sys/kernel files holding each field.
var files = [NumFields]string{
	Domainname: "domainname",
	Machine:    "arch",
	Nodename:   "hostname",
	Release:    "osrelease",
	Sysname:    "ostype",
	Version:    "version",
}

// Uname is the uname plugin.
type Uname struct {
	// sys: the root is "/", so one uname(2) call answers for the six
	// files (and sees the same UTS namespace node_exporter would).
	sys   bool
	uts   utsBuf
	files [NumFields]*kernfs.File
	vals  [NumFields][]byte
	info  *infodesc.Desc
}

// Init chooses uname(2) on the real root and the files under any other
// (a fixture tree, or a host's /proc mounted into a container).
func (u *Uname) Init(env sampler.Env) error {
	u.info = infodesc.New("node_uname_info",
		"Labeled system information as provided by the uname system call.", metric.Gauge,
		"domainname", "machine", "nodename", "release", "sysname", "version")
	u.sys = env.FS.Root == "/" && unameSupported
	for i, name := range files {
		u.files[i] = kernfs.NewFile(env.FS.Path("proc", "sys", "kernel", name), 256)
		u.files[i].NonBlocking = true
	}
	return nil
}

// Sample emits node_uname_info = 1.
func (u *Uname) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if u.sys {
		if err := u.uts.read(&u.vals); err != nil {
			return fmt.Errorf("uname: %w", err)
		}
	} else {
		for i, f := range u.files {
			data, err := f.Read()
			if err != nil {
				return err
			}
			u.vals[i] = Value(data)
		}
	}
	b.Add(u.info.Get(u.vals[:]), 1)
	return nil
}

// Value is the content of a one-line /proc/sys file without its newline.
func Value(data []byte) []byte {
	line, _ := kernfs.NextLine(data)
	return bytes.TrimRight(line, "\x00")
}
