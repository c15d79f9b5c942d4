// Package fibrechannel samples Fibre Channel HBA ports from
// /sys/class/fc_host (node_exporter's fibrechannel collector).
package fibrechannel

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval is longer than the sampler's: reading a statistics file
// asks the HBA's firmware (a mailbox command on some drivers).
const DefaultInterval = 10 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "fibrechannel",
		Description: "Fibre Channel HBA ports from /sys/class/fc_host",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &sampler.Common{Interval: sampler.Duration(DefaultInterval)}
		},
		New:          func(sampler.Configurable) sampler.Plugin { return &FibreChannel{} },
		SampleConfig: sampleConfig,
	})
}

// Counters maps statistics/ files to metrics (after node_fibrechannel_).
var Counters = [...][3]string{
	{"dumped_frames", "dumped_frames_total", "Number of dumped frames"},
	{"error_frames", "error_frames_total", "Number of errors in frames"},
	{"invalid_crc_count", "invalid_crc_total", "Invalid Cyclic Redundancy Check count"},
	{"rx_frames", "rx_frames_total", "Number of frames received"},
	{"rx_words", "rx_words_total", "Number of words received by host port"},
	{"tx_frames", "tx_frames_total", "Number of frames transmitted by host port"},
	{"tx_words", "tx_words_total", "Number of words transmitted by host port"},
	{"seconds_since_last_reset", "seconds_since_last_reset_total", "Number of seconds since last host port reset"},
	{"invalid_tx_word_count", "invalid_tx_words_total", "Number of invalid words transmitted by host port"},
	{"link_failure_count", "link_failure_total", "Number of times the host port link has failed"},
	{"loss_of_sync_count", "loss_of_sync_total", "Number of failures on either bit or transmission word boundaries"},
	{"loss_of_signal_count", "loss_of_signal_total", "Number of times signal has been lost"},
	{"nos_count", "nos_total", "Number Not_Operational Primitive Sequence received by host port"},
	{"fcp_packet_aborts", "fcp_packet_aborts_total", "Number of aborted packets"},
}

// infoFiles are the info labels after fc_host; the *_name and port_id
// files lose their "0x", as procfs does.
var infoFiles = [...]string{"speed", "port_state", "port_type", "port_id", "port_name", "fabric_name",
	"symbolic_name", "supported_classes", "supported_speeds", "dev_loss_tmo"}

var stripHex = map[string]bool{"port_id": true, "port_name": true, "fabric_name": true}

type counter struct {
	attr *sysattr.Attr
	desc *metric.Desc
}

type host struct {
	counters []counter
	info     *sysattr.Info
	desc     *infodesc.Desc
}

// FibreChannel is the fibrechannel plugin.
type FibreChannel struct {
	hosts []*host
}

// Init lists the FC hosts and their statistics files.
func (f *FibreChannel) Init(env sampler.Env) error {
	dir := env.FS.Path("sys", "class", "fc_host")
	for _, name := range sysattr.Devices(dir) {
		h := &host{desc: infodesc.New("node_fibrechannel_info", "Non-numeric data from /sys/class/fc_host/<host>, value is always 1.",
			metric.Gauge, "fc_host", "speed", "port_state", "port_type", "port_id", "port_name", "fabric_name",
			"symbolic_name", "supported_classes", "supported_speeds", "dev_loss_tmo")}
		for _, c := range Counters {
			if a := sysattr.Open(filepath.Join(dir, name, "statistics"), c[0]); a != nil {
				h.counters = append(h.counters, counter{a, metric.NewDesc("node_fibrechannel_"+c[1], c[2], metric.Counter, "fc_host", name)})
			}
		}
		h.info = sysattr.OpenInfo(filepath.Join(dir, name), name, infoFiles[:])
		h.info.Trim = func(i int, v []byte) []byte {
			if stripHex[infoFiles[i]] && len(v) > 2 {
				return v[2:]
			}
			return v
		}
		f.hosts = append(f.hosts, h)
	}
	if len(f.hosts) == 0 {
		return sampler.ErrNotAvailable
	}
	return nil
}

// Sample reads every host's info files and counters. A counter of all
// ones is one the HBA does not implement and is left out, as upstream; so
// is one the driver cannot give now.
func (f *FibreChannel) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var first error
	for _, h := range f.hosts {
		vals, err := h.info.Read()
		if err != nil && first == nil {
			first = err
		}
		b.Add(h.desc.Get(vals), 1)
		for _, c := range h.counters {
			raw, err := c.attr.Read()
			if err != nil {
				if !sysattr.Absent(err) && first == nil {
					first = fmt.Errorf("%s: %w", c.attr.Path(), err)
				}
				continue
			}
			v, ok := sysattr.ParseUint(raw)
			if !ok {
				if first == nil {
					first = fmt.Errorf("%s: %q is not a count", c.attr.Path(), raw)
				}
				continue
			}
			if v != 1<<64-1 {
				b.Add(c.desc, float64(v))
			}
		}
	}
	return first
}
