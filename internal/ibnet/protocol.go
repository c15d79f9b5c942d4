// Package ibnet sweeps an InfiniBand fabric's switch ports: it discovers
// the topology, splits the switches among the sampler hosts by fat-tree
// position, and reads each assigned port's performance counters through
// the vigil-ibmad helper (ibmad/), which speaks libibumad, so it works on
// /dev/infiniband/umad* and under ibsim's LD_PRELOAD shim alike.
package ibnet

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Bounds on what the helper may send: a line, a fabric.
const (
	maxLine     = 1024
	MaxSwitches = 4096
	MaxPorts    = 255
)

// Node types as the helper reports them (IB NodeInfo.NodeType).
const (
	TypeCA     = 1
	TypeSwitch = 2
)

// PortState values from PortInfo.
const (
	StateDown   = 1
	StateInit   = 2
	StateArmed  = 3
	StateActive = 4
)

// Counter indices, in the helper's C line order.
const (
	CXmitData = iota
	CRcvData
	CXmitPkts
	CRcvPkts
	CUcastXmitPkts
	CUcastRcvPkts
	CMcastXmitPkts
	CMcastRcvPkts
	CSymbolErrors
	CLinkErrorRecovery
	CLinkDowned
	CRcvErrors
	CRcvRemotePhysErrors
	CRcvSwitchRelayErrors
	CXmitDiscards
	CXmitConstraintErrors
	CRcvConstraintErrors
	CLocalLinkIntegrityErrors
	CExcessiveBufferOverrunErrors
	CVL15Dropped
	CXmitWait
	// PortXmitDiscardDetails (optional; FlagXmitDiscardDetails): a
	// breakdown of CXmitDiscards.
	CXmitDiscardInactive
	CXmitDiscardNeighborMTU
	CXmitDiscardSwLifetimeLimit
	CXmitDiscardSwHOQLifetimeLimit
	// PortRcvErrorDetails (optional; FlagRcvErrorDetails): a breakdown of
	// CRcvErrors and CRcvSwitchRelayErrors.
	CRcvLocalPhyErrors
	CRcvMalformedPacketErrors
	CRcvBufferOverrunErrors
	CRcvDLIDMappingErrors
	CRcvVLMappingErrors
	CRcvLoopingErrors
	// PortVLXmitWaitCounters (optional; FlagVLXmitWait): CVLXmitWait0+vl
	// for VL 0..15.
	CVLXmitWait0
	NCounters = CVLXmitWait0 + NVLs
)

// NVLs is the number of virtual lanes with a PortVLXmitWait counter.
const NVLs = 16

// Flags of a counter line: which optional attributes were read, and
// which were skipped because the switch refused or did not answer them
// (the helper then stops asking that switch until the next discovery).
const (
	FlagXmitDiscardDetails = 1 << iota
	FlagRcvErrorDetails
	FlagVLXmitWait
	FlagXmitDiscardDetailsSkipped
	FlagRcvErrorDetailsSkipped
	FlagVLXmitWaitSkipped
	flagsMax = 1<<iota - 1
	// FlagsRead and FlagsSkipped group them.
	FlagsRead    = FlagXmitDiscardDetails | FlagRcvErrorDetails | FlagVLXmitWait
	FlagsSkipped = FlagXmitDiscardDetailsSkipped | FlagRcvErrorDetailsSkipped | FlagVLXmitWaitSkipped
)

// CounterGroup is the flag that covers counter k (0 = always read).
func CounterGroup(k int) uint8 {
	switch {
	case k >= CVLXmitWait0:
		return FlagVLXmitWait
	case k >= CRcvLocalPhyErrors:
		return FlagRcvErrorDetails
	case k >= CXmitDiscardInactive:
		return FlagXmitDiscardDetails
	}
	return 0
}

// counterBits is counter k's width in the MAD: the extended data and
// packet counters are 64-bit, PortCounters' at most 32, the details and
// the VL counters 16.
func counterBits(k int) int {
	switch {
	case k < CSymbolErrors:
		return 64
	case k < CXmitDiscardInactive:
		return 32
	}
	return 16
}

// Switch is one discovered switch.
type Switch struct {
	GUID   uint64
	LID    uint16
	NPorts int
	Desc   string
	Ports  []Port
}

// Port is one switch port as discovered, with its remote end if linked.
type Port struct {
	Num        int
	State      int
	Phys       int
	Width      int // PortInfo.LinkWidthActive (encoded)
	Speed      int // PortInfo.LinkSpeedActive (encoded)
	ESpeed     int // PortInfo.LinkSpeedExtActive (encoded; 0 = none)
	OperVLs    int // PortInfo.OperationalVLs (1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14)
	RemoteGUID uint64
	RemotePort int
	RemoteType int
	RemoteLID  uint16
	RemoteDesc string
}

// Topology is the result of one discovery.
type Topology struct {
	Switches []Switch
}

var (
	errSyntax  = errors.New("malformed helper line")
	errTooMany = errors.New("helper sent too much")
)

// fields splits a line on single spaces into at most len(dst) fields; the
// last field takes the rest of the line (descriptions contain spaces).
func fields(line []byte, dst [][]byte) int {
	n := 0
	for n < len(dst)-1 {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			break
		}
		dst[n] = line[:i]
		line = line[i+1:]
		n++
	}
	dst[n] = line
	return n + 1
}

// parseUint parses a decimal or (hex=true) hexadecimal unsigned integer
// without allocating.
func parseUint(b []byte, hex bool, bits int) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case hex && c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case hex && c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		base := uint64(10)
		if hex {
			base = 16
		}
		if v > (^uint64(0)-d)/base {
			return 0, false
		}
		v = v*base + d
	}
	if bits < 64 && v >= 1<<bits {
		return 0, false
	}
	return v, true
}

func parseInt(b []byte, max int) (int, bool) {
	v, ok := parseUint(b, false, 32)
	if !ok || v > uint64(max) {
		return 0, false
	}
	return int(v), true
}

// TopologyDecoder assembles a Topology from the helper's S/P lines.
type TopologyDecoder struct {
	topo  Topology
	cur   *Switch
	f     [13][]byte
	ports int
}

// Line feeds one line (without its newline). It returns done=true on the
// closing E line.
func (d *TopologyDecoder) Line(line []byte) (done bool, err error) {
	if len(line) == 0 {
		return false, errSyntax
	}
	switch line[0] {
	case 'S':
		n := fields(line, d.f[:5])
		if n < 4 || len(d.f[0]) != 1 {
			return false, fmt.Errorf("%w: switch line %q", errSyntax, trunc(line))
		}
		guid, ok1 := parseUint(d.f[1], true, 64)
		lid, ok2 := parseUint(d.f[2], false, 16)
		np, ok3 := parseInt(d.f[3], MaxPorts)
		if !ok1 || !ok2 || !ok3 {
			return false, fmt.Errorf("%w: switch line %q", errSyntax, trunc(line))
		}
		if len(d.topo.Switches) >= MaxSwitches {
			return false, errTooMany
		}
		desc := ""
		if n == 5 {
			desc = cleanDesc(d.f[4])
		}
		d.topo.Switches = append(d.topo.Switches, Switch{GUID: guid, LID: uint16(lid), NPorts: np, Desc: desc})
		d.cur = &d.topo.Switches[len(d.topo.Switches)-1]
	case 'P':
		if d.cur == nil {
			return false, fmt.Errorf("%w: port before switch", errSyntax)
		}
		n := fields(line, d.f[:13])
		if n < 12 || len(d.f[0]) != 1 {
			return false, fmt.Errorf("%w: port line %q", errSyntax, trunc(line))
		}
		var p Port
		var ok [11]bool
		p.Num, ok[0] = parseInt(d.f[1], MaxPorts)
		p.State, ok[1] = parseInt(d.f[2], 15)
		p.Phys, ok[2] = parseInt(d.f[3], 15)
		p.Width, ok[3] = parseInt(d.f[4], 255)
		p.Speed, ok[4] = parseInt(d.f[5], 255)
		p.ESpeed, ok[5] = parseInt(d.f[6], 255)
		p.OperVLs, ok[6] = parseInt(d.f[7], 15)
		p.RemoteGUID, ok[7] = parseUint(d.f[8], true, 64)
		p.RemotePort, ok[8] = parseInt(d.f[9], MaxPorts)
		p.RemoteType, ok[9] = parseInt(d.f[10], 4)
		var rl uint64
		rl, ok[10] = parseUint(d.f[11], false, 16)
		p.RemoteLID = uint16(rl)
		for _, o := range ok {
			if !o {
				return false, fmt.Errorf("%w: port line %q", errSyntax, trunc(line))
			}
		}
		if p.Num < 1 || p.Num > d.cur.NPorts {
			return false, fmt.Errorf("%w: port %d of a %d-port switch", errSyntax, p.Num, d.cur.NPorts)
		}
		if n == 13 {
			p.RemoteDesc = cleanDesc(d.f[12])
		}
		if len(d.cur.Ports) >= d.cur.NPorts {
			return false, fmt.Errorf("%w: more ports than the switch has", errSyntax)
		}
		if d.ports++; d.ports > MaxSwitches*MaxPorts {
			return false, errTooMany
		}
		d.cur.Ports = append(d.cur.Ports, p)
	case 'E':
		return true, nil
	case 'X':
		return false, fmt.Errorf("helper: %s", trunc(bytes.TrimSpace(line[1:])))
	default:
		return false, fmt.Errorf("%w: %q", errSyntax, trunc(line))
	}
	return false, nil
}

// Topology returns what was decoded.
func (d *TopologyDecoder) Topology() Topology { return d.topo }

func cleanDesc(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 64 {
		b = b[:64]
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			c = '?'
		}
		out[i] = c
	}
	return string(out)
}

func trunc(b []byte) string {
	if len(b) > 80 {
		b = b[:80]
	}
	q := strconv.Quote(string(b))
	return q[1 : len(q)-1]
}

// CounterLine is one decoded C line.
type CounterLine struct {
	LID   uint16
	Port  int
	OK    bool
	Flags uint8 // Flag*: the optional attributes read or skipped
	V     [NCounters]uint64
}

// ParseCounters decodes "C <lid> <port> 1 <flags> v0 … v46" in place,
// without allocating. A failed port ("C lid port 0") has OK=false and no
// values. Each value must fit its counter's width; an optional
// attribute not read (its flag clear) must read 0.
func ParseCounters(line []byte, c *CounterLine) error {
	if len(line) < 7 || line[0] != 'C' || line[1] != ' ' {
		return errSyntax
	}
	line = line[2:]
	const nf = 4 + NCounters
	var k int
	for k = 0; k < nf; k++ {
		i := bytes.IndexByte(line, ' ')
		tok := line
		if i >= 0 {
			tok = line[:i]
		}
		switch k {
		case 0:
			v, ok := parseUint(tok, false, 16)
			if !ok {
				return errSyntax
			}
			c.LID = uint16(v)
		case 1:
			v, ok := parseInt(tok, MaxPorts)
			if !ok {
				return errSyntax
			}
			c.Port = v
		case 2:
			switch string(tok) {
			case "0":
				c.OK = false
			case "1":
				c.OK = true
			default:
				return errSyntax
			}
		case 3:
			v, ok := parseInt(tok, flagsMax)
			if !ok {
				return errSyntax
			}
			c.Flags = uint8(v)
		default:
			j := k - 4
			v, ok := parseUint(tok, false, counterBits(j))
			if !ok {
				return errSyntax
			}
			if g := CounterGroup(j); g != 0 && v != 0 && c.Flags&g == 0 {
				return errSyntax // a value for an attribute not read
			}
			c.V[j] = v
		}
		if i < 0 {
			k++
			break
		}
		line = line[i+1:]
		if k == nf-1 {
			return errSyntax // trailing fields
		}
	}
	if c.OK && k != nf || !c.OK && k != 3 {
		return errSyntax
	}
	return nil
}

// ParseEnd decodes "E <n> <nanoseconds> <MADs>".
func ParseEnd(line []byte) (n int, ns int64, mads int, err error) {
	var f [4][]byte
	if fields(line, f[:]) != 4 || string(f[0]) != "E" {
		return 0, 0, 0, errSyntax
	}
	nn, ok1 := parseUint(f[1], false, 32)
	t, ok2 := parseUint(f[2], false, 63)
	m, ok3 := parseUint(f[3], false, 32)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, 0, errSyntax
	}
	return int(nn), int64(t), int(m), nil
}
