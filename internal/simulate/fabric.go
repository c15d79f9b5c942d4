package simulate

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// The simulated fabric (--fabric): a two-level fat tree over the nodes,
// swept as the ibnet plugin sweeps a real one (docs/fabric-view.md has
// the series), so the dashboard's Fabric view and `vigil fabric top` have
// something live to show. Each leaf is swept by its first node, the
// spines spread over the leaves' first nodes; a node's CA port is busy
// while the scheduler runs a job on it, a leaf's up-links carry its busy
// nodes' traffic (one leaf in four sends 3.5 times its share through one
// spine), up-links past 90 % wait (PortXmitWait) and discard, one port in
// 41 has a bad cable (symbol errors) and one link in 97 is down one
// minute in ten.

// FabricOptions shape the simulated fabric.
type FabricOptions struct {
	Nodes, First int
	Seed         uint64
	// HostsPerLeaf (0: 18, half a 36-port switch's ports) and Spines (0:
	// half the leaves, 2 to 18).
	HostsPerLeaf, Spines int
	// Scheduler, if set, makes the nodes' ports busy while they run jobs.
	Scheduler *Scheduler
}

// Capacity of every simulated link: 4x EDR, 100 Gb/s.
const fabricCapacity = 12.5e9

// Fabric is the simulated fabric's topology; its sweepers hold the
// counters.
type Fabric struct {
	o                   FabricOptions
	leaves, spines      int
	hosts               int           // nodes
	sweeperOf           map[int][]int // node index → switches it sweeps (0..leaves-1 leaves, then spines)
	leafName, spineName func(int) string
}

// NewFabric lays the fat tree out over o.Nodes nodes.
func NewFabric(o FabricOptions) (*Fabric, error) {
	if o.Nodes <= 0 || o.Nodes > 100_000 {
		return nil, fmt.Errorf("fabric: %d nodes: want 1..100000", o.Nodes)
	}
	if o.HostsPerLeaf <= 0 {
		o.HostsPerLeaf = 18
	}
	if o.First <= 0 {
		o.First = 1
	}
	f := &Fabric{o: o, hosts: o.Nodes, sweeperOf: map[int][]int{}}
	f.leaves = (o.Nodes + o.HostsPerLeaf - 1) / o.HostsPerLeaf
	f.spines = o.Spines
	if f.spines <= 0 {
		f.spines = min(max((f.leaves+1)/2, 2), 18)
	}
	if f.leaves+f.spines > 4096 {
		return nil, fmt.Errorf("fabric: %d switches: at most 4096", f.leaves+f.spines)
	}
	f.leafName = func(k int) string { return fmt.Sprintf("leaf%02d", k+1) }
	f.spineName = func(k int) string { return fmt.Sprintf("spine%02d", k+1) }
	for k := range f.leaves {
		f.sweeperOf[k*o.HostsPerLeaf] = append(f.sweeperOf[k*o.HostsPerLeaf], k)
	}
	for s := range f.spines {
		node := (s * f.leaves / f.spines) * o.HostsPerLeaf
		f.sweeperOf[node] = append(f.sweeperOf[node], f.leaves+s)
	}
	return f, nil
}

// Switches is the number of simulated switches.
func (f *Fabric) Switches() int { return f.leaves + f.spines }

func (f *Fabric) guid(sw int) string { return fmt.Sprintf("0x0002c90200%06x", 0x100000+sw) }
func (f *Fabric) hcaGUID(i int) string {
	return fmt.Sprintf("0x0002c90300%06x", i)
}

// portSim is one simulated switch port: its series and counters.
type portSim struct {
	ca           int  // node index of a CA port, -1 for a switch link
	leaf, spine  int  // the leaf and spine of a switch link (-1 for CA)
	fromSpine    bool // a spine's port down to a leaf
	d            [fabricSeries]*metric.Desc
	c            [fabricSeries]float64 // counter totals
	errRate      float64               // symbol errors per second
	flapPhase    uint64
	flaps        bool
	linkDownedAt bool
}

// Indexes of a port's series.
const (
	fsInfo = iota
	fsUp
	fsRate
	fsTxData
	fsRxData
	fsTxPkts
	fsRxPkts
	fsWait
	fsSymbol
	fsRcvErr
	fsDiscards
	fsLinkDowned
	fabricSeries
)

var fabricNames = [fabricSeries]string{"vigil_ib_port_info", "vigil_ib_port_up", "vigil_ib_port_rate_bytes_per_second",
	"vigil_ib_port_transmit_data_bytes_total", "vigil_ib_port_receive_data_bytes_total",
	"vigil_ib_port_transmit_packets_total", "vigil_ib_port_receive_packets_total", "vigil_ib_port_transmit_wait_total",
	"vigil_ib_port_symbol_errors_total", "vigil_ib_port_receive_errors_total", "vigil_ib_port_transmit_discards_total",
	"vigil_ib_port_link_downed_total"}

// FabricSweep is what one sweeping node emits: its switches' ports.
type FabricSweep struct {
	f     *Fabric
	ports []portSim
	info  []*metric.Desc // vigil_ib_switch_info of its switches
}

// Sweeper returns the sweep of node index i (0-based), nil if i sweeps
// nothing.
func (f *Fabric) Sweeper(i int) *FabricSweep {
	sws := f.sweeperOf[i]
	if len(sws) == 0 {
		return nil
	}
	s := &FabricSweep{f: f}
	for _, sw := range sws {
		name, level := "", "leaf"
		if sw < f.leaves {
			name = f.leafName(sw)
		} else {
			name, level = f.spineName(sw-f.leaves), "spine"
		}
		lid := strconv.Itoa(sw + 1)
		s.info = append(s.info, metric.NewDesc("vigil_ib_switch_info", "Switch of the fabric, by fat-tree level.", metric.Gauge,
			"switch_guid", f.guid(sw), "switch", name, "level", level, "lid", lid))
		add := func(port int, remoteGUID, remote, remotePort, remoteType, remoteLID string, p portSim) {
			lbl := []string{"switch_guid", f.guid(sw), "switch", name, "port", strconv.Itoa(port), "remote_guid", remoteGUID,
				"remote", remote, "remote_port", remotePort, "remote_type", remoteType, "remote_lid", remoteLID, "lid", lid}
			for k, n := range fabricNames {
				typ := metric.Counter
				l := lbl
				switch k {
				case fsInfo:
					l = append(append([]string(nil), lbl...), "rate", "100 Gb/s", "width", "4x", "speed", "EDR")
					typ = metric.Gauge
				case fsUp, fsRate:
					typ = metric.Gauge
				}
				p.d[k] = metric.NewDesc(n, "", typ, l...)
			}
			h := mix(f.o.Seed ^ mix(uint64(sw)<<16|uint64(port)))
			p.c[fsTxData], p.c[fsRxData] = float64(h%1e12), float64(h>>20%1e12)
			p.c[fsSymbol] = float64(h % 7)
			if h%41 == 0 { // a bad cable: a steady trickle of errors
				p.errRate = 0.5 + float64(h>>8%100)/50
			}
			// Both ends of a link flap together.
			lh := mix(f.o.Seed ^ mix(uint64(p.ca+1)<<40|uint64(p.leaf+1)<<20|uint64(p.spine+1)))
			if lh%97 == 1 {
				p.flaps, p.flapPhase = true, lh>>12
			}
			s.ports = append(s.ports, p)
		}
		if sw < f.leaves {
			for j := 0; j < f.o.HostsPerLeaf; j++ {
				i := sw*f.o.HostsPerLeaf + j
				if i >= f.hosts {
					break
				}
				add(j+1, f.hcaGUID(i), NodeName(f.o.First+i)+" HCA-1", "1", "ca", strconv.Itoa(1000+i), portSim{ca: i, leaf: -1, spine: -1})
			}
			for sp := range f.spines {
				add(f.o.HostsPerLeaf+sp+1, f.guid(f.leaves+sp), f.spineName(sp), strconv.Itoa(sw+1), "switch", strconv.Itoa(f.leaves+sp+1),
					portSim{ca: -1, leaf: sw, spine: sp})
			}
		} else {
			sp := sw - f.leaves
			for l := range f.leaves {
				add(l+1, f.guid(l), f.leafName(l), strconv.Itoa(f.o.HostsPerLeaf+sp+1), "switch", strconv.Itoa(l+1),
					portSim{ca: -1, leaf: l, spine: sp, fromSpine: true})
			}
		}
	}
	return s
}

// Series is the number of series the sweep emits per tick.
func (s *FabricSweep) Series() int { return len(s.info) + len(s.ports)*fabricSeries }

// hostLoad is node i's CA port utilization at t: busy while it runs a job.
func (f *Fabric) hostLoad(i int, t time.Time) float64 {
	if f.o.Scheduler != nil {
		if r, _ := f.o.Scheduler.at(i, t); r != nil {
			// Each job talks at its own pace.
			return 0.1 + 0.55*float64(mix(uint64(len(r.id))^mix(uint64(r.start)))%1000)/1000
		}
		return 0.005
	}
	h := mix(f.o.Seed ^ uint64(i))
	return 0.05 + 0.4*(0.5+0.5*math.Sin(float64(t.Unix())/300+float64(h%628)/100))
}

// upLoad is the demand on leaf l's up-link to spine sp at t, relative to
// its capacity: its busy nodes' traffic spread over the spines, the
// routing skewed so one spine gets more than its share.
func (f *Fabric) upLoad(l, sp int, t time.Time) float64 {
	sum := 0.0
	for j := 0; j < f.o.HostsPerLeaf; j++ {
		if i := l*f.o.HostsPerLeaf + j; i < f.hosts {
			sum += f.hostLoad(i, t)
		}
	}
	// Half the traffic leaves the leaf, over links sized for 2:1
	// blocking whatever the number of spines (a small tree runs several
	// cables per leaf and spine; one line stands for them).
	share := sum * 0.5 / float64(max(f.spines, f.o.HostsPerLeaf/2))
	// One leaf in four routes too much through one spine.
	if h := mix(f.o.Seed ^ uint64(l)); h%4 == 0 && int(h>>8%uint64(f.spines)) == sp {
		share *= 3.5
	}
	return share * (0.85 + 0.3*math.Sin(float64(t.Unix())/97+float64(l+3*sp)))
}

// Sample appends the sweep's series at t, the counters advanced by dt.
func (s *FabricSweep) Sample(t time.Time, dt time.Duration, b *metric.Batch) {
	sec := dt.Seconds()
	for _, d := range s.info {
		b.Add(d, 1)
	}
	for k := range s.ports {
		p := &s.ports[k]
		var tx, rx float64 // utilization each way
		switch {
		case p.ca >= 0:
			u := s.f.hostLoad(p.ca, t)
			tx, rx = u*0.9, u
		case !p.fromSpine: // leaf → spine
			tx, rx = s.f.upLoad(p.leaf, p.spine, t), s.f.upLoad(p.leaf, (p.spine+1)%s.f.spines, t)*0.8
		default: // spine → leaf
			tx, rx = s.f.upLoad(p.leaf, (p.spine+1)%s.f.spines, t)*0.8, s.f.upLoad(p.leaf, p.spine, t)
		}
		up := 1.0
		if p.flaps && (uint64(t.Unix())+p.flapPhase)%600 < 60 { // down one minute in ten
			if !p.linkDownedAt {
				p.c[fsLinkDowned]++
				p.linkDownedAt = true
			}
			up, tx, rx = 0, 0, 0
		} else {
			p.linkDownedAt = false
		}
		wait := 0.0
		if tx > 0.9 { // demand past what the link carries queues
			wait = (tx - 0.9) * 2e7
			p.c[fsDiscards] += math.Floor((tx - 0.9) * 50 * sec)
		}
		tx, rx = min(tx, 0.97), min(rx, 0.97)
		p.c[fsTxData] += tx * fabricCapacity * sec
		p.c[fsRxData] += rx * fabricCapacity * sec
		p.c[fsTxPkts] += tx * fabricCapacity / 4096 * sec
		p.c[fsRxPkts] += rx * fabricCapacity / 4096 * sec
		p.c[fsWait] += math.Round(wait * sec)
		p.c[fsSymbol] += math.Round(p.errRate * sec)
		p.c[fsRcvErr] += math.Round(p.errRate * 0.2 * sec)
		for j, d := range p.d {
			switch j {
			case fsInfo:
				b.Add(d, 1)
			case fsUp:
				b.Add(d, up)
			case fsRate:
				b.Add(d, fabricCapacity)
			default:
				b.Add(d, math.Floor(p.c[j]))
			}
		}
	}
}

// fabricSource is a node that also sweeps its share of the fabric.
type fabricSource struct {
	source
	sweep *FabricSweep
}

func (n fabricSource) Sample(t time.Time, dt time.Duration, b *metric.Batch) {
	n.source.Sample(t, dt, b)
	n.sweep.Sample(t, dt, b)
}

// sweeper is Sweeper on a fabric that may be nil (no --fabric).
func (f *Fabric) sweeper(i int) *FabricSweep {
	if f == nil {
		return nil
	}
	return f.Sweeper(i)
}

// switches is Switches on a fabric that may be nil.
func (f *Fabric) switches() int {
	if f == nil {
		return 0
	}
	return f.Switches()
}
