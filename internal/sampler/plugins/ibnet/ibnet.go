// Package ibnet reports the fabric sweep of internal/ibnet: the sweep runs
// on its own goroutine at 1 Hz, offset so it ends before the tick, and
// each tick copies the latest sweep's totals (the node daemon never waits
// on the fabric).
package ibnet

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/ibnet"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "ibnet",
		Description:  "InfiniBand fabric sweep of the switch ports assigned to this host: vigil_ib_port_*{switch,port,remote,...}",
		NewConfig:    func() sampler.Configurable { return DefaultConfig() },
		New:          func(c sampler.Configurable) sampler.Plugin { return New(c.(*Config)) },
		SampleConfig: sampleConfig,
	})
}

// firstWait bounds the first tick's wait for the first sweep (discovery
// included); later ticks never wait.
const firstWait = 3 * time.Second

// Bounds on the sampler host list.
const (
	maxHosts     = 4096
	maxHostsFile = 1 << 20
)

// Config is the [plugins.ibnet] table.
type Config struct {
	sampler.Common
	Samplers      []string         `toml:"samplers" comment:"sampler hosts sharing the sweep; empty = this host sweeps all"`
	SamplersFile  string           `toml:"samplers_file" comment:"file listing the sampler hosts, one a line"`
	Host          string           `toml:"host" comment:"this host's name in the list; empty = short host name"`
	Helper        string           `toml:"helper" comment:"vigil-ibmad binary; empty = next to this program, else PATH"`
	SweepInterval sampler.Duration `toml:"sweep_interval" comment:"sweep period"`
	SweepOffset   sampler.Duration `toml:"sweep_offset" comment:"sweep start within the period"`
	Rediscover    sampler.Duration `toml:"rediscover" comment:"re-discover the fabric this often"`
	MADTimeout    sampler.Duration `toml:"mad_timeout" comment:"per-MAD timeout"`
	MADRetries    int              `toml:"mad_retries" comment:"per-MAD retries"`
	MADWindow     int              `toml:"mad_window" comment:"counter MADs in flight at once"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{SweepInterval: sampler.Duration(ibnet.DefaultInterval), SweepOffset: sampler.Duration(300 * time.Millisecond),
		Rediscover: sampler.Duration(ibnet.DefaultRediscover), MADTimeout: sampler.Duration(ibnet.DefaultMADTimeout), MADRetries: ibnet.DefaultRetries, MADWindow: ibnet.DefaultWindow}
}

// Validate checks the table.
func (c *Config) Validate() error {
	var errs []string
	if d := c.SweepInterval.D(); d < 100*time.Millisecond || d > time.Hour {
		errs = append(errs, fmt.Sprintf("sweep_interval must be between 100ms and 1h, got %v", d))
	}
	if d := c.SweepOffset.D(); d < 0 || d >= c.SweepInterval.D() {
		errs = append(errs, fmt.Sprintf("sweep_offset must be in [0, sweep_interval), got %v", d))
	}
	if d := c.Rediscover.D(); d < time.Second || d > 24*time.Hour {
		errs = append(errs, fmt.Sprintf("rediscover must be between 1s and 24h, got %v", d))
	}
	if d := c.MADTimeout.D(); d < time.Millisecond || d > 10*time.Second {
		errs = append(errs, fmt.Sprintf("mad_timeout must be between 1ms and 10s, got %v", d))
	}
	if c.MADRetries < 0 || c.MADRetries > 10 {
		errs = append(errs, fmt.Sprintf("mad_retries must be between 0 and 10, got %d", c.MADRetries))
	}
	if c.MADWindow < 1 || c.MADWindow > ibnet.MaxWindow {
		errs = append(errs, fmt.Sprintf("mad_window must be between 1 and %d, got %d", ibnet.MaxWindow, c.MADWindow))
	}
	if len(c.Samplers) > maxHosts {
		errs = append(errs, fmt.Sprintf("at most %d samplers", maxHosts))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// ParseHosts reads a host list: one name a line, # comments, blanks ignored.
func ParseHosts(data []byte) ([]string, error) {
	if len(data) > maxHostsFile {
		return nil, fmt.Errorf("host list larger than %d bytes", maxHostsFile)
	}
	var hosts []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.ContainsAny(line, " \t") || len(line) > 255 {
			return nil, fmt.Errorf("bad host name %q", line)
		}
		if len(hosts) >= maxHosts {
			return nil, fmt.Errorf("more than %d hosts", maxHosts)
		}
		hosts = append(hosts, line)
	}
	return hosts, sc.Err()
}

// Per-link series, in emission order after info and up.
var counterSeries = [...]struct {
	name, help string
	idx        int
	scale      float64
}{
	{"vigil_ib_port_transmit_data_bytes_total", "Bytes sent (PortXmitData × 4).", ibnet.CXmitData, 4},
	{"vigil_ib_port_receive_data_bytes_total", "Bytes received (PortRcvData × 4).", ibnet.CRcvData, 4},
	{"vigil_ib_port_transmit_packets_total", "Packets sent.", ibnet.CXmitPkts, 1},
	{"vigil_ib_port_receive_packets_total", "Packets received.", ibnet.CRcvPkts, 1},
	{"vigil_ib_port_unicast_transmit_packets_total", "Unicast packets sent.", ibnet.CUcastXmitPkts, 1},
	{"vigil_ib_port_unicast_receive_packets_total", "Unicast packets received.", ibnet.CUcastRcvPkts, 1},
	{"vigil_ib_port_multicast_transmit_packets_total", "Multicast packets sent.", ibnet.CMcastXmitPkts, 1},
	{"vigil_ib_port_multicast_receive_packets_total", "Multicast packets received.", ibnet.CMcastRcvPkts, 1},
	{"vigil_ib_port_transmit_wait_total", "Ticks with data to send but no credits (PortXmitWait).", ibnet.CXmitWait, 1},
	{"vigil_ib_port_symbol_errors_total", "Symbol errors.", ibnet.CSymbolErrors, 1},
	{"vigil_ib_port_link_error_recovery_total", "Link error recoveries.", ibnet.CLinkErrorRecovery, 1},
	{"vigil_ib_port_link_downed_total", "Times the link went down.", ibnet.CLinkDowned, 1},
	{"vigil_ib_port_receive_errors_total", "Received packets with errors.", ibnet.CRcvErrors, 1},
	{"vigil_ib_port_receive_remote_physical_errors_total", "Received packets marked bad by the sender.", ibnet.CRcvRemotePhysErrors, 1},
	{"vigil_ib_port_receive_switch_relay_errors_total", "Packets the switch could not relay.", ibnet.CRcvSwitchRelayErrors, 1},
	{"vigil_ib_port_transmit_discards_total", "Outbound packets discarded.", ibnet.CXmitDiscards, 1},
	{"vigil_ib_port_transmit_constraint_errors_total", "Outbound packets dropped by constraints.", ibnet.CXmitConstraintErrors, 1},
	{"vigil_ib_port_receive_constraint_errors_total", "Inbound packets dropped by constraints.", ibnet.CRcvConstraintErrors, 1},
	{"vigil_ib_port_local_link_integrity_errors_total", "Local link integrity errors.", ibnet.CLocalLinkIntegrityErrors, 1},
	{"vigil_ib_port_excessive_buffer_overrun_errors_total", "Excessive buffer overruns.", ibnet.CExcessiveBufferOverrunErrors, 1},
	{"vigil_ib_port_vl15_dropped_total", "VL15 (management) packets dropped.", ibnet.CVL15Dropped, 1},
	// The optional details: emitted for a link once its switch answered
	// them (ibnet.Avail). They break down transmit_discards and
	// receive_errors/receive_switch_relay_errors, not add to them.
	{"vigil_ib_port_transmit_discards_inactive_total", "Outbound packets discarded because the port was down or congested (PortInactiveDiscards).", ibnet.CXmitDiscardInactive, 1},
	{"vigil_ib_port_transmit_discards_neighbor_mtu_total", "Outbound packets discarded for exceeding the neighbour's MTU (PortNeighborMTUDiscards).", ibnet.CXmitDiscardNeighborMTU, 1},
	{"vigil_ib_port_transmit_discards_sw_lifetime_limit_total", "Outbound packets discarded by the switch lifetime limit (PortSwLifetimeLimitDiscards).", ibnet.CXmitDiscardSwLifetimeLimit, 1},
	{"vigil_ib_port_transmit_discards_sw_hoq_lifetime_limit_total", "Outbound packets discarded by the head-of-queue lifetime limit (PortSwHOQLifetimeLimitDiscards).", ibnet.CXmitDiscardSwHOQLifetimeLimit, 1},
	{"vigil_ib_port_receive_local_phy_errors_total", "Received packets with local physical errors (PortLocalPhysicalErrors).", ibnet.CRcvLocalPhyErrors, 1},
	{"vigil_ib_port_receive_malformed_packet_errors_total", "Received malformed packets (PortMalformedPacketErrors).", ibnet.CRcvMalformedPacketErrors, 1},
	{"vigil_ib_port_receive_buffer_overrun_errors_total", "Received packets dropped by buffer overrun (PortBufferOverrunErrors).", ibnet.CRcvBufferOverrunErrors, 1},
	{"vigil_ib_port_receive_dlid_mapping_errors_total", "Received packets with no route for their DLID (PortDLIDMappingErrors).", ibnet.CRcvDLIDMappingErrors, 1},
	{"vigil_ib_port_receive_vl_mapping_errors_total", "Received packets with no VL mapping (PortVLMappingErrors).", ibnet.CRcvVLMappingErrors, 1},
	{"vigil_ib_port_receive_looping_errors_total", "Received packets that would leave by their input port (PortLoopingErrors).", ibnet.CRcvLoopingErrors, 1},
}

// vlWaitName is the per-VL wait series (label vl="0".."15").
const vlWaitName = "vigil_ib_port_vl_transmit_wait_total"

var vlNames = [ibnet.NVLs]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15"}

// Plugin is the ibnet plugin.
type Plugin struct {
	cfg     *Config
	sweeper *ibnet.Sweeper
	cancel  context.CancelFunc
	done    chan struct{}

	topoGen uint64
	// Rebuilt on a topology change: per link, its descriptors.
	up       []*metric.Desc
	counters [][len(counterSeries)]*metric.Desc // nil: an optional counter the link lacks
	vlWait   [][ibnet.NVLs]*metric.Desc         // nil: a VL not reported
	static   []*metric.Desc                     // info, rate and switch info
	staticV  []float64
	self     [5]*metric.Desc
	failures [ibnet.NFailures]*metric.Desc
	// copied under the sweeper's lock each tick
	upV       []bool
	totals    [][ibnet.NCounters]uint64
	snap      ibnet.Snapshot // scalars only
	nSwitches int
	waited    bool
	copyFn    func(*ibnet.Snapshot)
}

// New returns the plugin for cfg.
func New(cfg *Config) *Plugin { return &Plugin{cfg: cfg} }

// Init resolves the host list and the helper and starts the sweep.
func (p *Plugin) Init(env sampler.Env) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	hosts := append([]string(nil), p.cfg.Samplers...)
	if p.cfg.SamplersFile != "" {
		data, err := os.ReadFile(p.cfg.SamplersFile)
		if err != nil {
			return fmt.Errorf("read samplers_file: %w", err)
		}
		more, err := ParseHosts(data)
		if err != nil {
			return fmt.Errorf("samplers_file %s: %w", p.cfg.SamplersFile, err)
		}
		hosts = append(hosts, more...)
	}
	host := p.cfg.Host
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("host name: %w", err)
		}
		host, _, _ = strings.Cut(h, ".")
	}
	if len(hosts) > 0 && !contains(hosts, host) {
		return fmt.Errorf("host %q is not among the samplers: %w", host, sampler.ErrNotAvailable)
	}
	helper, err := ibnet.FindHelper(p.cfg.Helper)
	if err != nil {
		return fmt.Errorf("%v: %w", err, sampler.ErrNotAvailable)
	}
	p.sweeper = ibnet.New(ibnet.Config{Helper: helper, Hosts: hosts, Host: host,
		Interval: p.cfg.SweepInterval.D(), Rediscover: p.cfg.Rediscover.D(),
		MADTimeout: p.cfg.MADTimeout.D(), Retries: p.cfg.MADRetries, Window: p.cfg.MADWindow, Logger: env.Logger})
	p.self = [5]*metric.Desc{
		metric.NewDesc("vigil_ibnet_sweep_duration_seconds", "How long the last fabric sweep took (discovery included when it ran).", metric.Gauge),
		metric.NewDesc("vigil_ibnet_ports_swept", "Switch ports read in the last sweep.", metric.Gauge),
		metric.NewDesc("vigil_ibnet_switches_assigned", "Switches this host sweeps.", metric.Gauge),
		metric.NewDesc("vigil_ibnet_mad_seconds", "Mean time per MAD in the last sweep.", metric.Gauge),
		metric.NewDesc("vigil_ibnet_sweeps_total", "Fabric sweeps completed.", metric.Counter),
	}
	for i, r := range ibnet.FailureReasons {
		p.failures[i] = metric.NewDesc("vigil_ibnet_sweep_failures_total", "Fabric sweep failures: helper (died, timed out, garbled), discover (fabric did not answer), port (a port's MAD failed), unsupported (a switch refused or did not answer an optional attribute: skipped for it until the next discovery).", metric.Counter, "reason", r)
	}
	p.copyFn = p.copy
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		p.sweeper.Run(ctx, p.cfg.SweepOffset.D())
	}()
	return nil
}

func contains(hs []string, h string) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// Close stops the sweep and its helper.
func (p *Plugin) Close() error {
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
	return nil
}

// copy runs under the sweeper's lock: the totals are copied into the
// plugin's own arrays; descriptors are rebuilt only on a topology change.
func (p *Plugin) copy(s *ibnet.Snapshot) {
	if s.TopoGen != p.topoGen {
		p.topoGen = s.TopoGen
		p.render(s)
	}
	copy(p.upV, s.Up)
	copy(p.totals, s.Totals)
	p.snap.SweepGen, p.snap.Duration, p.snap.MADTime, p.snap.PortsSwept, p.snap.Failures =
		s.SweepGen, s.Duration, s.MADTime, s.PortsSwept, s.Failures
	p.nSwitches = len(s.Switches)
}

func (p *Plugin) render(s *ibnet.Snapshot) {
	n := len(s.Links)
	p.up = make([]*metric.Desc, n)
	p.counters = make([][len(counterSeries)]*metric.Desc, n)
	p.vlWait = make([][ibnet.NVLs]*metric.Desc, n)
	p.upV = make([]bool, n)
	p.totals = make([][ibnet.NCounters]uint64, n)
	p.static, p.staticV = p.static[:0], p.staticV[:0]
	for i := range s.Links {
		l := &s.Links[i]
		rate, width, speed, bps := l.Rate()
		labels := []string{"switch_guid", ibnet.GUID(l.SwitchGUID), "switch", l.Switch, "port", strconv.Itoa(l.Port),
			"remote_guid", ibnet.GUID(l.RemoteGUID), "remote", l.Remote, "remote_port", strconv.Itoa(l.RemotePort),
			"remote_type", ibnet.RemoteTypeName(l.RemoteType), "remote_lid", strconv.Itoa(int(l.RemoteLID)), "lid", strconv.Itoa(int(l.LID))}
		info := append(append([]string(nil), labels...), "rate", rate, "width", width, "speed", speed)
		p.static = append(p.static,
			metric.NewDesc("vigil_ib_port_info", "A swept switch port and its link.", metric.Gauge, info...),
			metric.NewDesc("vigil_ib_port_rate_bytes_per_second", "Link data capacity in bytes per second.", metric.Gauge, labels...))
		p.staticV = append(p.staticV, 1, bps)
		p.up[i] = metric.NewDesc("vigil_ib_port_up", "1 if the link is active, 0 if down or not yet active.", metric.Gauge, labels...)
		a := s.Avail[i]
		for k, c := range counterSeries {
			if g := ibnet.CounterGroup(c.idx); g != 0 && a.Groups&g == 0 {
				continue
			}
			p.counters[i][k] = metric.NewDesc(c.name, c.help, metric.Counter, labels...)
		}
		if a.Groups&ibnet.FlagVLXmitWait != 0 {
			for v := range ibnet.NVLs {
				if a.VLs&(1<<v) != 0 {
					p.vlWait[i][v] = metric.NewDesc(vlWaitName, "Ticks with data to send on this VL but no credits (PortVLXmitWait); the port's operational VLs and any VL counted.",
						metric.Counter, append(labels[:len(labels):len(labels)], "vl", vlNames[v])...)
				}
			}
		}
	}
	for _, sw := range s.Switches {
		p.static = append(p.static, metric.NewDesc("vigil_ib_switch_info", "A swept switch and its fat-tree level.", metric.Gauge,
			"switch_guid", ibnet.GUID(sw.GUID), "switch", sw.Desc, "level", sw.Level, "lid", strconv.Itoa(int(sw.LID))))
		p.staticV = append(p.staticV, 1)
	}
}

// Sample appends the latest sweep; it never waits for one.
func (p *Plugin) Sample(ctx context.Context, _ time.Time, b *metric.Batch) error {
	if !p.waited {
		// Only the first tick waits, and briefly, so that
		// `vigil sample --once` shows a sweep.
		p.waited = true
		t := time.NewTimer(firstWait)
		select {
		case <-p.sweeper.FirstSweep():
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	p.sweeper.Read(p.copyFn)
	for i, d := range p.static {
		b.Add(d, p.staticV[i])
	}
	for i, d := range p.up {
		v := 0.0
		if p.upV[i] {
			v = 1
		}
		b.Add(d, v)
		t := &p.totals[i]
		for k, c := range counterSeries {
			if d := p.counters[i][k]; d != nil {
				b.Add(d, float64(t[c.idx])*c.scale)
			}
		}
		for v, d := range p.vlWait[i] {
			if d != nil {
				b.Add(d, float64(t[ibnet.CVLXmitWait0+v]))
			}
		}
	}
	if p.snap.SweepGen > 0 {
		b.Add(p.self[0], p.snap.Duration.Seconds())
		b.Add(p.self[1], float64(p.snap.PortsSwept))
		b.Add(p.self[3], p.snap.MADTime.Seconds())
	}
	b.Add(p.self[2], float64(p.nSwitches))
	b.Add(p.self[4], float64(p.snap.SweepGen))
	for i, d := range p.failures {
		b.Add(d, float64(p.snap.Failures[i]))
	}
	return nil
}
