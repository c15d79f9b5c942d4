package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// The netlink messages the plugin reads on Linux (netlink_linux.go): one
// RTM_GETSTATS dump a tick gives every interface's struct
// rtnl_link_stats64 in binary, the source /proc/net/dev prints as text,
// rx_nohandler included, for one send and one receive instead of a
// /proc/net/dev read and a sysfs read per interface. Names come from
// RTM_NEWLINK messages: a RTM_GETLINK dump at start and the link group's
// notifications after. The parsing here is portable so it can be fuzzed
// anywhere; the kernel is trusted no more than a file.

// Netlink constants (include/uapi/linux/{netlink,rtnetlink,if_link}.h).
const (
	nlmsgHdrLen   = 16
	nlmsgNoop     = 1
	nlmsgError    = 2
	nlmsgDone     = 3
	nlmsgOverrun  = 4
	nlmFRequest   = 0x1
	nlmFDump      = 0x300
	rtmNewLink    = 16
	rtmDelLink    = 17
	rtmGetLink    = 18
	rtmNewStats   = 92
	rtmGetStats   = 94
	iflaIfname    = 3
	iflaStatsLink = 1 // IFLA_STATS_LINK_64
	nlaTypeMask   = 0x3fff
	ifinfomsgLen  = 16
	ifStatsMsgLen = 12
)

// Indices into struct rtnl_link_stats64, a list of u64 the kernel only
// ever appends to.
const (
	rxPackets = iota
	txPackets
	rxBytes
	txBytes
	rxErrors
	txErrors
	rxDropped
	txDropped
	multicast
	collisions
	rxLengthErrors
	rxOverErrors
	rxCRCErrors
	rxFrameErrors
	rxFIFOErrors
	rxMissedErrors
	txAbortedErrors
	txCarrierErrors
	txFIFOErrors
	txHeartbeatErrors
	txWindowErrors
	rxCompressed
	txCompressed
	rxNohandler // from Linux 4.6; RTM_GETSTATS is 4.7, so always there

	minLinkStats = rxNohandler + 1
	maxLinkStats = 32 // more than any kernel has; the rest is ignored
)

// errNetlink is wrapped by every netlink parse error.
var errNetlink = errors.New("malformed netlink message")

// nlMsg is one netlink message.
type nlMsg struct {
	typ, flags uint16
	seq        uint32
	payload    []byte
}

// nextMsg splits the first message off data (one datagram of a receive).
func nextMsg(data []byte) (m nlMsg, rest []byte, err error) {
	if len(data) < nlmsgHdrLen {
		return m, nil, fmt.Errorf("%w: %d bytes left, a header is %d", errNetlink, len(data), nlmsgHdrLen)
	}
	n := binary.NativeEndian.Uint32(data)
	if n < nlmsgHdrLen || uint64(n) > uint64(len(data)) {
		return m, nil, fmt.Errorf("%w: length %d with %d bytes left", errNetlink, n, len(data))
	}
	m = nlMsg{
		typ:     binary.NativeEndian.Uint16(data[4:]),
		flags:   binary.NativeEndian.Uint16(data[6:]),
		seq:     binary.NativeEndian.Uint32(data[8:]),
		payload: data[nlmsgHdrLen:n],
	}
	next := min(align4(int(n)), len(data))
	return m, data[next:], nil
}

func align4(n int) int { return (n + 3) &^ 3 }

// nlError returns the errno of an NLMSG_ERROR or NLMSG_DONE payload (a
// negative int; 0 for an acknowledgement or a clean end).
func nlError(p []byte) (int32, error) {
	if len(p) < 4 {
		return 0, fmt.Errorf("%w: error payload of %d bytes", errNetlink, len(p))
	}
	return int32(binary.NativeEndian.Uint32(p)), nil
}

// attr returns the value of the first attribute of type typ in attrs.
func attr(attrs []byte, typ uint16) ([]byte, bool, error) {
	for len(attrs) > 0 {
		if len(attrs) < 4 {
			return nil, false, fmt.Errorf("%w: %d bytes of attribute header", errNetlink, len(attrs))
		}
		n := int(binary.NativeEndian.Uint16(attrs))
		if n < 4 || n > len(attrs) {
			return nil, false, fmt.Errorf("%w: attribute length %d with %d bytes left", errNetlink, n, len(attrs))
		}
		if binary.NativeEndian.Uint16(attrs[2:])&nlaTypeMask == typ {
			return attrs[4:n], true, nil
		}
		attrs = attrs[min(align4(n), len(attrs)):]
	}
	return nil, false, nil
}

// parseStats reads a RTM_NEWSTATS payload: the interface index and its
// counters into dst (at least minLinkStats of them; the rest, where the
// kernel sends fewer than maxLinkStats, keep their old values).
func parseStats(p []byte, dst *[maxLinkStats]uint64) (ifindex uint32, err error) {
	if len(p) < ifStatsMsgLen {
		return 0, fmt.Errorf("%w: stats message of %d bytes", errNetlink, len(p))
	}
	ifindex = binary.NativeEndian.Uint32(p[4:])
	v, ok, err := attr(p[ifStatsMsgLen:], iflaStatsLink)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: interface %d: no IFLA_STATS_LINK_64", errNetlink, ifindex)
	}
	n := min(len(v)/8, maxLinkStats)
	if n < minLinkStats {
		return 0, fmt.Errorf("%w: interface %d: %d counters, want at least %d", errNetlink, ifindex, n, minLinkStats)
	}
	for i := range n {
		dst[i] = binary.NativeEndian.Uint64(v[8*i:])
	}
	return ifindex, nil
}

// parseLink reads a RTM_NEWLINK or RTM_DELLINK payload: the interface
// index and name (only valid as long as p).
func parseLink(p []byte) (ifindex uint32, name []byte, err error) {
	if len(p) < ifinfomsgLen {
		return 0, nil, fmt.Errorf("%w: link message of %d bytes", errNetlink, len(p))
	}
	ifindex = binary.NativeEndian.Uint32(p[4:])
	v, ok, err := attr(p[ifinfomsgLen:], iflaIfname)
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, fmt.Errorf("%w: interface %d: no IFLA_IFNAME", errNetlink, ifindex)
	}
	for i, c := range v {
		if c == 0 {
			v = v[:i]
			break
		}
	}
	if len(v) == 0 || len(v) > 15 { // IFNAMSIZ - 1
		return 0, nil, fmt.Errorf("%w: interface %d: name of %d bytes", errNetlink, ifindex, len(v))
	}
	return ifindex, v, nil
}

// procCounters turns rtnl_link_stats64 into the sixteen /proc/net/dev
// columns, summed as the kernel's dev_seq_printf_stats sums them.
func procCounters(s *[maxLinkStats]uint64) [NumCols]uint64 {
	return [NumCols]uint64{
		s[rxBytes], s[rxPackets], s[rxErrors],
		s[rxDropped] + s[rxMissedErrors],
		s[rxFIFOErrors],
		s[rxLengthErrors] + s[rxOverErrors] + s[rxCRCErrors] + s[rxFrameErrors],
		s[rxCompressed], s[multicast],
		s[txBytes], s[txPackets], s[txErrors], s[txDropped],
		s[txFIFOErrors], s[collisions],
		s[txCarrierErrors] + s[txAbortedErrors] + s[txWindowErrors] + s[txHeartbeatErrors],
		s[txCompressed],
	}
}

// ifStatsReq asks RTM_GETSTATS for IFLA_STATS_LINK_64 of every interface
// (struct if_stats_msg with filter_mask bit 1 << (IFLA_STATS_LINK_64 - 1)).
var ifStatsReq = [ifStatsMsgLen]byte{8: 1}

// ifinfoReq asks RTM_GETLINK for every interface (struct ifinfomsg, all 0).
var ifinfoReq [ifinfomsgLen]byte

// sampleNetlink is Sample over netlink. A failed dump closes the socket,
// which the next tick opens again and first dumps the names on.
func (n *Netdev) sampleNetlink(b *metric.Batch) error {
	if n.nl == nil {
		nl, err := openNetlink()
		if err != nil {
			return err
		}
		n.nl, n.resync = nl, true
	}
	n.tick++
	n.batch = b
	defer func() { n.batch = nil }()
	defer n.forget()
	start := b.Len()
	for retried := false; ; retried = true {
		if n.resync {
			clear(n.names)
			clear(n.byIndex)
			n.resync = false
			if err := n.dump(rtmGetLink, ifinfoReq[:]); err != nil {
				return err
			}
		}
		if err := n.dump(rtmGetStats, ifStatsReq[:]); err != nil || !n.resync || retried {
			return err
		}
		// The names went stale during this dump (notifications lost to a
		// burst of new links, or a link counted before its notification
		// was read): dump the links and count again, once, so that every
		// interface is counted under its name on the tick it is seen.
		b.Truncate(start)
	}
}

func (n *Netdev) dump(typ uint16, req []byte) error {
	err := n.nl.dump(typ, req, n.handle)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNotifyLost):
		n.resync = true // the counters are good; the names may not be
		return nil
	}
	n.nl.close()
	n.nl = nil
	return err
}

// handleMsg takes one message of a dump: a link's name (from the dump of
// links or a notification) or an interface's counters.
func (n *Netdev) handleMsg(m nlMsg) error {
	switch m.typ {
	case rtmNewLink, rtmDelLink:
		idx, name, err := parseLink(m.payload)
		if err != nil {
			return err
		}
		if m.typ == rtmDelLink {
			delete(n.names, idx)
			delete(n.byIndex, idx)
			return nil
		}
		if old, ok := n.names[idx]; ok && old == string(name) {
			return nil
		}
		if len(n.names) >= maxNames {
			return fmt.Errorf("netlink: more than %d interfaces", maxNames)
		}
		n.names[idx] = string(name) // new, or renamed: counted under the new name from now on
		delete(n.byIndex, idx)
	case rtmNewStats:
		idx, err := parseStats(m.payload, &n.stats)
		if err != nil {
			return err
		}
		d := n.byIndex[idx]
		if d == nil {
			name, ok := n.names[idx]
			if !ok {
				// Counted before its notification was read: sampleNetlink
				// dumps the links and counts again.
				n.resync = true
				return nil
			}
			d = n.device([]byte(name))
			d.ifindex = idx
			n.byIndex[idx] = d
		}
		d.lastSeen = n.tick
		if d.skip {
			return nil
		}
		v := procCounters(&n.stats)
		for i, desc := range d.descs {
			n.batch.Add(desc, float64(v[i]))
		}
		// parseStats made sure the kernel sent rx_nohandler.
		n.batch.Add(d.nohandlerDesc, float64(n.stats[rxNohandler]))
	}
	return nil
}

// Close closes the netlink socket and the files.
func (n *Netdev) Close() error {
	if n.nl != nil {
		n.nl.close()
		n.nl = nil
	}
	for name, d := range n.devices {
		n.drop(name, d)
	}
	if n.file != nil {
		n.file.Close()
	}
	return nil
}
