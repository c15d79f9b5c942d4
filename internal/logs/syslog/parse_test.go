package syslog

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

var (
	recv = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	utc  = time.UTC
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, in string
		want     Message
	}{
		{"3164 full", "<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8",
			Message{Time: time.Date(2025, 10, 11, 22, 14, 15, 0, utc), Host: "mymachine", App: "su",
				Text: "'su root' failed for lonvick on /dev/pts/8", Facility: 4, Severity: 2}},
		{"3164 pid single digit day", "<13>Jan  5 09:59:58 cn01 sshd[4242]: Accepted publickey for bob",
			Message{Time: time.Date(2026, 1, 5, 9, 59, 58, 0, utc), Host: "cn01", App: "sshd", ProcID: "4242",
				Text: "Accepted publickey for bob", Facility: 1, Severity: 5}},
		{"3164 no PRI", "Jan  5 09:59:58 cn02 kernel: oom-killer invoked",
			Message{Time: time.Date(2026, 1, 5, 9, 59, 58, 0, utc), Host: "cn02", App: "kernel",
				Text: "oom-killer invoked", Facility: 1, Severity: 5}},
		{"3164 no header", "<11>just some text",
			Message{Time: recv, Text: "just some text", Facility: 1, Severity: 3}},
		{"3164 tag without colon relayed by rsyslog", "<13>Jan  5 09:59:58 cn03 myjob started step 2",
			Message{Time: time.Date(2026, 1, 5, 9, 59, 58, 0, utc), Host: "cn03", App: "myjob",
				Text: "started step 2", Facility: 1, Severity: 5}},
		{"3164 tag without host", "<14>Jan  5 09:00:00 slurmd[77]: launched job 12",
			Message{Time: time.Date(2026, 1, 5, 9, 0, 0, 0, utc), App: "slurmd", ProcID: "77",
				Text: "launched job 12", Facility: 1, Severity: 6}},
		{"3164 december received in january", "<14>Dec 31 23:59:59 h app: late",
			Message{Time: time.Date(2025, 12, 31, 23, 59, 59, 0, utc), Host: "h", App: "app", Text: "late", Facility: 1, Severity: 6}},
		{"3164 rfc3339 stamp and fraction", "<30>2026-01-05T09:00:00.123456+01:00 node7 systemd[1]: Started x.",
			Message{Time: time.Date(2026, 1, 5, 8, 0, 0, 123456000, utc), Host: "node7", App: "systemd", ProcID: "1",
				Text: "Started x.", Facility: 3, Severity: 6}},
		{"3164 leap second", "<13>Jan  5 09:59:60 h t: x",
			Message{Time: time.Date(2026, 1, 5, 9, 59, 59, 0, utc), Host: "h", App: "t", Text: "x", Facility: 1, Severity: 5}},
		{"3164 bad PRI kept raw", "<999>Jan  5 09:59:58 h t: x",
			Message{Time: recv, Text: "<999>Jan  5 09:59:58 h t: x", Facility: 1, Severity: 5, Malformed: true}},
		{"3164 unclosed PRI kept raw", "<1",
			Message{Time: recv, Text: "<1", Facility: 1, Severity: 5, Malformed: true}},
		{"3164 trailing newline", "<13>Jan  5 09:59:58 h t: x\r\n",
			Message{Time: time.Date(2026, 1, 5, 9, 59, 58, 0, utc), Host: "h", App: "t", Text: "x", Facility: 1, Severity: 5}},
		{"5424 example", "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - \xef\xbb\xbf'su root' failed",
			Message{Time: time.Date(2003, 10, 11, 22, 14, 15, 3000000, utc), Host: "mymachine.example.com", App: "su",
				MsgID: "ID47", Text: "'su root' failed", Facility: 4, Severity: 2}},
		{"5424 structured data", `<165>1 2003-10-11T22:14:15.003-07:00 h evntslog - ID47 [exampleSDID@32473 iut="3" eventID="1011" x="a\"]b"][examplePriority@32473 class="high"] An application event`,
			Message{Time: time.Date(2003, 10, 12, 5, 14, 15, 3000000, utc), Host: "h", App: "evntslog", MsgID: "ID47",
				SD:   `[exampleSDID@32473 iut="3" eventID="1011" x="a\"]b"][examplePriority@32473 class="high"]`,
				Text: "An application event", Facility: 20, Severity: 5}},
		{"5424 rsyslog space after tag", "<13>1 2026-01-05T09:00:00Z h a - - -  text",
			Message{Time: time.Date(2026, 1, 5, 9, 0, 0, 0, utc), Host: "h", App: "a", Text: "text", Facility: 1, Severity: 5}},
		{"5424 nil everything", "<13>1 - - - - - -",
			Message{Time: recv, Facility: 1, Severity: 5}},
		{"5424 lower-case t and z", "<13>1 2026-01-05t09:00:00z h a 12 - - m",
			Message{Time: time.Date(2026, 1, 5, 9, 0, 0, 0, utc), Host: "h", App: "a", ProcID: "12", Text: "m", Facility: 1, Severity: 5}},
		{"5424 bad timestamp kept raw", "<13>1 2026-13-45T99:00:00Z h a - - - m",
			Message{Time: recv, Text: "<13>1 2026-13-45T99:00:00Z h a - - - m", Facility: 1, Severity: 5, Malformed: true}},
		{"5424 truncated header keeps parsed fields", "<13>1 2026-01-05T09:00:00Z host",
			Message{Time: time.Date(2026, 1, 5, 9, 0, 0, 0, utc), Text: "<13>1 2026-01-05T09:00:00Z host", Facility: 1, Severity: 5, Malformed: true}},
		{"5424 unterminated SD kept raw", `<13>1 - h a - - [x a="b" msg`,
			Message{Time: recv, Host: "h", App: "a", Text: `<13>1 - h a - - [x a="b" msg`, Facility: 1, Severity: 5, Malformed: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m Message
			Parse([]byte(c.in), recv, utc, &m)
			c.want.Received = recv
			if !m.Time.Equal(c.want.Time) {
				t.Errorf("time %v, want %v", m.Time, c.want.Time)
			}
			m.Time, c.want.Time = time.Time{}, time.Time{}
			if m != c.want {
				t.Errorf("got  %+v\nwant %+v", m, c.want)
			}
		})
	}
}

func TestParseSeverity(t *testing.T) {
	for in, want := range map[string]uint8{"warning": 4, "warn": 4, "err": 3, "error": 3, "7": 7, "emerg": 0} {
		got, err := ParseSeverity(in)
		if err != nil || got != want {
			t.Errorf("ParseSeverity(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseSeverity("loud"); err == nil || !strings.Contains(err.Error(), "loud") {
		t.Errorf("ParseSeverity(loud) error %v, want one naming the input", err)
	}
}

func TestFramer(t *testing.T) {
	in := "<13>first line\n" +
		"22 <13>octet\nwith newline" + // octet counted, 22 bytes
		"<13>third\r\n" +
		"5000 " + strings.Repeat("x", 5000) + // octet count above max: rejected
		"<13>" + strings.Repeat("y", 200) + "\n" + // too long: truncated
		"2026-01-05 no pri line starting with digits\n" +
		"<13>last without newline"
	fr := NewFramer(strings.NewReader(in), 100)
	type got struct {
		frame    string
		trunc    bool
		rejected bool
	}
	var out []got
	for {
		f, trunc, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil && !isRejected(err) {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, got{string(f), trunc, err != nil})
	}
	want := []got{
		{"<13>first line", false, false},
		{"<13>octet\nwith newline", false, false},
		{"<13>third\r", false, false},
		{"", false, true},
		{"<13>" + strings.Repeat("y", 96), true, false},
		{"2026-01-05 no pri line starting with digits", false, false},
		{"<13>last without newline", false, false},
	}
	if len(out) != len(want) {
		t.Fatalf("got %d frames %+v, want %d", len(out), out, len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("frame %d: got %+v, want %+v", i, out[i], want[i])
		}
	}
}

func isRejected(err error) bool { return errors.Is(err, ErrRejected) }

func TestFramerShortOctetFrame(t *testing.T) {
	fr := NewFramer(strings.NewReader("50 <13>short"), 100)
	if _, _, err := fr.Next(); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("Next on a cut octet frame: %v, want unexpected EOF", err)
	}
}
