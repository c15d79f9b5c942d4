package ipvs

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected IPVS format")

// NumStats is the number of totals on the third line of ip_vs_stats.
const NumStats = 5

// ParseStats reads the totals of /proc/net/ip_vs_stats: the third line holds
// five hex numbers (connections, incoming and outgoing packets, incoming and
// outgoing bytes) and, as procfs requires, ends with a newline.
func ParseStats(data []byte) (st [NumStats]uint64, err error) {
	var line []byte
	for i := 1; i <= 3; i++ {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return st, fmt.Errorf("line %d: no newline, want 3 lines or more: %w", i, ErrFormat)
		}
		line, data = data[:nl], data[nl+1:]
	}
	var f [NumStats + 1][]byte
	if n := kernfs.Fields(line, f[:]); n != NumStats {
		return st, fmt.Errorf("line 3: %d fields, want %d hex totals: %w", n, NumStats, ErrFormat)
	}
	for i := range st {
		v, ok := kernfs.ParseHex(f[i], 16)
		if !ok {
			return st, fmt.Errorf("line 3 field %d: %q is not a hex number: %w", i+1, clip(f[i]), ErrFormat)
		}
		st[i] = v
	}
	return st, nil
}

// Backend is one "->" line of /proc/net/ip_vs with the service it belongs
// to. Addresses are 16 bytes, IPv4 ones in their IPv4-mapped form; Proto
// and Mark point into the scanned data.
type Backend struct {
	Proto      []byte // TCP, UDP, SCTP or FWM
	Mark       []byte // the firewall mark as written (hex), FWM services only
	HasLocal   bool   // false for FWM services, which have no address
	Local      [16]byte
	LocalPort  uint16
	Remote     [16]byte
	RemotePort uint16
	Weight     uint64
	Active     uint64
	Inactive   uint64
}

// maxName bounds the protocol and mark fields (the kernel writes at most 8
// characters), so a hostile file cannot make long labels.
const maxName = 16

// Scanner walks the backends of /proc/net/ip_vs without allocating.
type Scanner struct {
	data []byte
	line int
	err  error
	B    Backend // the current backend, valid after Next returns true
}

// Reset starts a scan of data.
func (s *Scanner) Reset(data []byte) {
	*s = Scanner{data: data}
}

// Err is the error that stopped the scan, if any.
func (s *Scanner) Err() error { return s.err }

func (s *Scanner) fail(format string, args ...any) bool {
	s.err = fmt.Errorf("line %d: "+format+": %w", append(append([]any{s.line}, args...), ErrFormat)...)
	return false
}

// Next advances to the next backend. Header lines are skipped; a service
// line ("TCP  0A000001:0050 rr", "FWM  00000064 wlc") sets the service of
// the backends after it. As procfs, lines too short to be a service or a
// backend are skipped, and a backend before any service has empty service
// fields.
func (s *Scanner) Next() bool {
	if s.err != nil {
		return false
	}
	var f [7][]byte
	for len(s.data) > 0 {
		var line []byte
		line, s.data = kernfs.NextLine(s.data)
		s.line++
		n := kernfs.Fields(line, f[:])
		switch {
		case n == 0 || string(f[0]) == "IP" || string(f[0]) == "Prot":
		case n >= 2 && string(f[1]) == "RemoteAddress:Port":
		case string(f[0]) == "->":
			if n < 6 {
				continue
			}
			b := &s.B
			var ok bool
			if b.Remote, b.RemotePort, ok = ParseAddrPort(f[1]); !ok {
				return s.fail("backend %q: want HEXIP:PORT or [IPv6]:PORT", clip(f[1]))
			}
			for i, dst := range [3]*uint64{&b.Weight, &b.Active, &b.Inactive} {
				v, err := kernfs.ParseUint(f[3+i])
				if err != nil {
					return s.fail("field %d: %q is not a count", 4+i, clip(f[3+i]))
				}
				*dst = v
			}
			return true
		case n < 2:
		case len(f[0]) > maxName || len(f[1]) > 64:
			return s.fail("service %q %q: want a protocol and an address", clip(f[0]), clip(f[1]))
		case string(f[0]) == "FWM":
			if len(f[1]) > maxName {
				return s.fail("firewall mark %q: longer than %d", clip(f[1]), maxName)
			}
			s.B.Proto, s.B.Mark, s.B.HasLocal = f[0], f[1], false
			s.B.Local, s.B.LocalPort = [16]byte{}, 0
		default:
			a, p, ok := ParseAddrPort(f[1])
			if !ok {
				return s.fail("service %s %q: want HEXIP:PORT or [IPv6]:PORT", clip(f[0]), clip(f[1]))
			}
			s.B.Proto, s.B.Mark, s.B.HasLocal = f[0], nil, true
			s.B.Local, s.B.LocalPort = a, p
		}
	}
	return false
}

// ParseAddrPort reads the kernel's "0A000001:0050" (IPv4, hex, host order
// as written) or "[2001:0db8:0000:0000:0000:0000:0000:0001]:0050" (the
// full IPv6 form of %pI6); the port is 4 hex digits. IPv4 comes back in
// its IPv4-mapped 16-byte form.
func ParseAddrPort(b []byte) (addr [16]byte, port uint16, ok bool) {
	switch {
	case len(b) == 13 && b[8] == ':':
		v, ok := kernfs.ParseHex(b[:8], 8)
		if !ok {
			return addr, 0, false
		}
		addr[10], addr[11] = 0xff, 0xff
		addr[12], addr[13], addr[14], addr[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	case len(b) == 46 && b[0] == '[' && b[40] == ']' && b[41] == ':':
		for g := 0; g < 8; g++ {
			grp := b[1+5*g : 5+5*g]
			if g < 7 && b[5+5*g] != ':' {
				return addr, 0, false
			}
			v, ok := kernfs.ParseHex(grp, 4)
			if !ok || len(grp) != 4 {
				return addr, 0, false
			}
			addr[2*g], addr[2*g+1] = byte(v>>8), byte(v)
		}
	default:
		return addr, 0, false
	}
	p, ok := kernfs.ParseHex(b[len(b)-4:], 4)
	return addr, uint16(p), ok
}

// clip bounds a field quoted in an error.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
