// Package selinux reports the SELinux mode (node_exporter's selinux
// collector) from selinuxfs and /etc/selinux/config.
package selinux

import (
	"bytes"
	"context"
	_ "embed"
	"os"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "selinux",
		Description:  "SELinux enabled, configured and current mode",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &SELinux{} },
		SampleConfig: sampleConfig,
	})
}

// rereadConfigEvery ticks /etc/selinux/config is read again.
const rereadConfigEvery = 64

// SELinux is the selinux plugin.
type SELinux struct {
	enforce, config                 *kernfs.File
	enabledD, configModeD, currentD *metric.Desc
	enabled                         bool
	configMode                      float64
	tick                            uint64
}

var kernel = []byte("kernel")

// Init decides whether SELinux is enabled, as the library node_exporter
// uses does: selinuxfs (/sys/fs/selinux) is mounted and the sampler's own
// security context is not "kernel" (SELinux not initialised). Neither
// changes without a reboot.
func (s *SELinux) Init(env sampler.Env) error {
	s.enforce = kernfs.NewFile(env.FS.Path("sys", "fs", "selinux", "enforce"), 16)
	s.enforce.NonBlocking = true
	if _, err := s.enforce.Read(); err == nil {
		ctx, err := os.ReadFile(env.FS.Path("proc", "self", "attr", "current"))
		ctx = bytes.TrimRight(ctx, "\x00\n")
		s.enabled = err == nil && len(ctx) > 0 && !bytes.Equal(ctx, kernel)
	}
	if !s.enabled {
		s.enforce.Close()
	}
	s.config = kernfs.NewFile(env.FS.Path("etc", "selinux", "config"), 2048)
	s.config.Reopen = true // edited by replacing it
	s.enabledD = metric.NewDesc("node_selinux_enabled", "SELinux is enabled, 1 is true, 0 is false", metric.Gauge)
	s.configModeD = metric.NewDesc("node_selinux_config_mode", "Configured SELinux enforcement mode", metric.Gauge)
	s.currentD = metric.NewDesc("node_selinux_current_mode", "Current SELinux enforcement mode", metric.Gauge)
	return nil
}

// Sample reports enabled 0, or 1, the configured mode (1 enforcing, 0
// permissive, -1 disabled or unknown; the file is read every 64 ticks) and
// the current one (the enforce file; -1 when unreadable).
func (s *SELinux) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if !s.enabled {
		b.Add(s.enabledD, 0)
		return nil
	}
	s.tick++
	b.Add(s.enabledD, 1)
	if s.tick%rereadConfigEvery == 1 {
		s.configMode = -1
		if data, err := s.config.Read(); err == nil {
			s.configMode = ConfigMode(data)
		}
	}
	b.Add(s.configModeD, s.configMode)
	cur := -1.0
	if mode, err := s.enforce.Read(); err == nil {
		if v, err := kernfs.ParseInt(kernfs.TrimSpace(mode)); err == nil {
			cur = float64(v)
		}
	}
	b.Add(s.currentD, cur)
	return nil
}

// ConfigMode reads SELINUX= from /etc/selinux/config: 1 for enforcing, 0
// for permissive, -1 otherwise. Blank lines and lines starting with # or ;
// are skipped; the value may be quoted.
func ConfigMode(data []byte) float64 {
	mode := -1.0
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		line = kernfs.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := kernfs.Cut(line, '=')
		if !ok || string(kernfs.TrimSpace(k)) != "SELINUX" {
			continue
		}
		v = bytes.Trim(kernfs.TrimSpace(v), `"`)
		switch string(v) {
		case "enforcing":
			mode = 1
		case "permissive":
			mode = 0
		default:
			mode = -1
		}
	}
	return mode
}
