package syslog

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	"<34>Oct 11 22:14:15 mymachine su: 'su root' failed",
	"<13>1 2003-10-11T22:14:15.003Z h su - ID47 [a b=\"c\\\"]\"] \xef\xbb\xbfmsg",
	"<13>1 - - - - - -",
	"<999>", "<", "<1>", "Jan  5 09:59:60 h t[: x", "<13>2026-01-05t09:00:00z h a: b",
	"<13>1 2026-01-05T09:00:60Z h a - - [x", "",
}

// checkMessage asserts what must hold for any input.
func checkMessage(t *testing.T, in string, m *Message) {
	if m.Facility > 23 || m.Severity > 7 {
		t.Fatalf("PRI out of range for %q: %+v", in, m)
	}
	if m.Malformed && m.Text != in && m.Text != string(trimEnd([]byte(in))) {
		t.Fatalf("malformed message lost its raw text: %q -> %q", in, m.Text)
	}
	if m.Time.IsZero() {
		t.Fatalf("zero time for %q", in)
	}
	_ = utf8.ValidString(m.Text)
}

func FuzzParse3164(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var m Message
		_ = Parse3164(in, recv, utc, &m)
		checkMessage(t, in, &m)
		Parse([]byte(in), recv, utc, &m)
		checkMessage(t, in, &m)
	})
}

func FuzzParse5424(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var m Message
		err := Parse5424(in, recv, &m)
		if (err != nil) != m.Malformed {
			t.Fatalf("error %v but Malformed=%v for %q", err, m.Malformed, in)
		}
		checkMessage(t, in, &m)
	})
}

func FuzzOctetFraming(f *testing.F) {
	f.Add([]byte("12 <13>1 - - -\n<13>line\n3 abc"))
	f.Add([]byte("99999999999 x"))
	f.Add([]byte("7 short"))
	f.Add(bytes.Repeat([]byte("a"), 300))
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 64
		fr := NewFramer(bytes.NewReader(in), max)
		total := 0
		for i := 0; ; i++ {
			b, _, err := fr.Next()
			if errors.Is(err, ErrRejected) {
				continue
			}
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(b) > max {
				t.Fatalf("frame of %d bytes above max %d", len(b), max)
			}
			total += len(b)
			if total > len(in) || i > len(in) {
				t.Fatalf("framer produced more than its input")
			}
		}
	})
}
