package syslog

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

func BenchmarkParse(b *testing.B) {
	cases := []struct{ name, msg string }{
		{"rfc3164", "<13>Jan  5 09:59:58 cn0042 sshd[4242]: Accepted publickey for alice from 10.1.2.3 port 52144 ssh2: RSA SHA256:abcdef"},
		{"rfc5424", `<165>1 2026-01-05T22:14:15.003Z cn0042 slurmd 77 ID47 [job@32473 id="1011" user="bob"] launch task StepId=1011.0 request from UID:1000`},
		{"malformed", "<999>this is not syslog at all but must be kept"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			frame := []byte(c.msg)
			now := time.Now()
			var m Message
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				Parse(frame, now, time.UTC, &m)
			}
		})
	}
}

func BenchmarkFramer(b *testing.B) {
	msg := "<13>Jan  5 09:59:58 cn0042 sshd[4242]: Accepted publickey for alice from 10.1.2.3 port 52144"
	for _, octet := range []bool{false, true} {
		name := "newline"
		var in strings.Builder
		for range 1000 {
			if octet {
				in.WriteString(strconv.Itoa(len(msg)) + " ")
				in.WriteString(msg)
			} else {
				in.WriteString(msg + "\n")
			}
		}
		if octet {
			name = "octet"
		}
		data := []byte(in.String())
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			r := bytes.NewReader(data)
			for b.Loop() {
				r.Reset(data)
				fr := NewFramer(r, DefaultMaxFrame)
				n := 0
				for {
					if _, _, err := fr.Next(); err != nil {
						break
					}
					n++
				}
				if n != 1000 {
					b.Fatalf("%d frames", n)
				}
			}
		})
	}
}
