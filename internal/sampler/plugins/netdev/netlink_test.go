package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Builders of the kernel's messages, for the handler and the fuzzer.

func nlAttr(typ uint16, v []byte) []byte {
	a := make([]byte, align4(4+len(v)))
	binary.NativeEndian.PutUint16(a, uint16(4+len(v)))
	binary.NativeEndian.PutUint16(a[2:], typ)
	copy(a[4:], v)
	return a
}

func nlMessage(typ uint16, seq uint32, payload []byte) []byte {
	m := make([]byte, align4(nlmsgHdrLen+len(payload)))
	binary.NativeEndian.PutUint32(m, uint32(nlmsgHdrLen+len(payload)))
	binary.NativeEndian.PutUint16(m[4:], typ)
	binary.NativeEndian.PutUint32(m[8:], seq)
	copy(m[nlmsgHdrLen:], payload)
	return m
}

func linkPayload(idx uint32, name string) []byte {
	p := make([]byte, ifinfomsgLen)
	binary.NativeEndian.PutUint32(p[4:], idx)
	p = append(p, nlAttr(4, []byte{0xff, 0xff, 0, 0})...) // IFLA_MTU, skipped
	return append(p, nlAttr(iflaIfname, append([]byte(name), 0))...)
}

// statsPayload gives counter i the value base+i, in nstats counters.
func statsPayload(idx uint32, base uint64, nstats int) []byte {
	p := make([]byte, ifStatsMsgLen)
	binary.NativeEndian.PutUint32(p[4:], idx)
	v := make([]byte, 8*nstats)
	for i := range nstats {
		binary.NativeEndian.PutUint64(v[8*i:], base+uint64(i))
	}
	p = append(p, nlAttr(0, nil)...) // IFLA_STATS_UNSPEC padding, as the kernel aligns
	return append(p, nlAttr(iflaStatsLink, v)...)
}

func newNetlinkForTest() *Netdev {
	n := &Netdev{cfg: Config{MaxDevices: 8, Netlink: true}, useNetlink: true,
		devices: map[string]*device{}, names: map[uint32]string{}, byIndex: map[uint32]*device{}}
	n.handle = n.handleMsg
	return n
}

func (n *Netdev) feed(t *testing.T, b *metric.Batch, msgs ...[]byte) error {
	t.Helper()
	n.batch = b
	defer func() { n.batch = nil }()
	var data []byte
	for _, m := range msgs {
		data = append(data, m...)
	}
	for len(data) > 0 {
		m, rest, err := nextMsg(data)
		if err != nil {
			return err
		}
		if err := n.handleMsg(m); err != nil {
			return err
		}
		data = rest
	}
	return nil
}

func series(b *metric.Batch) map[string]float64 {
	out := map[string]float64{}
	for _, s := range b.Samples() {
		out[s.Desc.Name+"{"+s.Desc.Labels[0].Value+"}"] = s.Value
	}
	return out
}

func TestNetlinkHandler(t *testing.T) {
	n := newNetlinkForTest()
	var b metric.Batch
	n.tick = 1
	if err := n.feed(t, &b,
		nlMessage(rtmNewLink, 1, linkPayload(2, "eth0")),
		nlMessage(rtmNewStats, 2, statsPayload(2, 100, minLinkStats+1)),
	); err != nil {
		t.Fatal(err)
	}
	got := series(&b)
	// The /proc/net/dev sums, from counters base+i.
	for name, want := range map[string]float64{
		"node_network_receive_bytes_total{eth0}":     100 + rxBytes,
		"node_network_receive_drop_total{eth0}":      200 + rxDropped + rxMissedErrors,
		"node_network_receive_frame_total{eth0}":     400 + rxLengthErrors + rxOverErrors + rxCRCErrors + rxFrameErrors,
		"node_network_transmit_carrier_total{eth0}":  400 + txCarrierErrors + txAbortedErrors + txWindowErrors + txHeartbeatErrors,
		"node_network_transmit_colls_total{eth0}":    100 + collisions,
		"node_network_receive_multicast_total{eth0}": 100 + multicast,
		"node_network_receive_nohandler_total{eth0}": 100 + rxNohandler,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if len(got) != NumCols+1 {
		t.Errorf("%d series, want %d: %v", len(got), NumCols+1, got)
	}

	// A rename (a notification, sequence 0) moves the counters to the new
	// name; an interface not named yet is skipped and asks for the links.
	b.Reset(b.Time)
	n.tick = 2
	if err := n.feed(t, &b,
		nlMessage(rtmNewLink, 0, linkPayload(2, "lan0")),
		nlMessage(rtmNewStats, 3, statsPayload(2, 7, minLinkStats)),
		nlMessage(rtmNewStats, 3, statsPayload(9, 7, minLinkStats)),
	); err != nil {
		t.Fatal(err)
	}
	got = series(&b)
	if got["node_network_receive_bytes_total{lan0}"] != 7+rxBytes || len(got) != NumCols+1 {
		t.Errorf("after the rename: %v", got)
	}
	if !n.resync {
		t.Error("an unnamed interface did not ask for the links")
	}

	// A removed link is forgotten by index.
	if err := n.feed(t, &b, nlMessage(rtmDelLink, 0, linkPayload(2, "lan0"))); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.names[2]; ok || n.byIndex[2] != nil {
		t.Errorf("index 2 still known after RTM_DELLINK: %v %v", n.names, n.byIndex)
	}

	// Malformed messages are errors, never panics or wrong numbers.
	for name, msg := range map[string][]byte{
		"short stats":   nlMessage(rtmNewStats, 4, statsPayload(3, 0, minLinkStats-1)),
		"no stats attr": nlMessage(rtmNewStats, 4, make([]byte, ifStatsMsgLen)),
		"no name":       nlMessage(rtmNewLink, 0, make([]byte, ifinfomsgLen)),
		"long name":     nlMessage(rtmNewLink, 0, linkPayload(3, "abcdefghijklmnopq")),
		"short link":    nlMessage(rtmNewLink, 0, []byte{1, 2}),
	} {
		if err := n.feed(t, &b, msg); !errors.Is(err, errNetlink) {
			t.Errorf("%s: err = %v, want errNetlink", name, err)
		}
	}
}

func TestNetlinkMaxNames(t *testing.T) {
	n := newNetlinkForTest()
	for i := range maxNames {
		n.names[uint32(i+1)] = fmt.Sprint("d", i)
	}
	var b metric.Batch
	if err := n.feed(t, &b, nlMessage(rtmNewLink, 0, linkPayload(maxNames+5, "one-more"))); err == nil {
		t.Fatal("no error past maxNames")
	}
}

func FuzzNetlink(f *testing.F) {
	f.Add(append(nlMessage(rtmNewLink, 1, linkPayload(2, "eth0")), nlMessage(rtmNewStats, 2, statsPayload(2, 1, minLinkStats))...))
	f.Add(nlMessage(rtmNewStats, 2, statsPayload(2, 1, maxLinkStats+3)))
	f.Add(nlMessage(nlmsgDone, 2, []byte{0, 0, 0, 0}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		n := newNetlinkForTest()
		var b metric.Batch
		for range 1000 {
			if len(data) == 0 {
				return
			}
			m, rest, err := nextMsg(data)
			if err != nil {
				if !errors.Is(err, errNetlink) {
					t.Fatalf("error %v does not wrap errNetlink", err)
				}
				return
			}
			if len(rest) >= len(data) {
				t.Fatalf("no progress: %d bytes, then %d", len(data), len(rest))
			}
			data = rest
			n.batch = &b
			if err := n.handleMsg(m); err != nil && !errors.Is(err, errNetlink) {
				t.Fatalf("error %v does not wrap errNetlink", err)
			}
			_, _ = nlError(m.payload)
		}
	})
}
