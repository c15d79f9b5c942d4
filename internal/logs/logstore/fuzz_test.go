package logstore

import (
	"strings"
	"testing"
)

// FuzzParseQuery: any query string parses or errors, never panics, and a
// parsed query compiles and matches without panicking.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{`host:cn01* app:sshd severity:warning pattern:42 "free text" words`,
		`host:"a b`, `"`, `x:`, `host:**?*`, `sev:0`} {
		f.Add(s, "cn01", "some free text words")
	}
	f.Fuzz(func(t *testing.T, q, host, text string) {
		pq, err := ParseQuery(q)
		if err != nil {
			return
		}
		m := pq.matcher()
		v := view{host: []byte(host), app: []byte(host), text: []byte(text)}
		m.match(&v)
		if pq.Host == "*" && !globFold([]byte("*"), []byte(host)) {
			t.Fatal("* must match everything")
		}
		if pq.Host != "" && !strings.ContainsAny(pq.Host, "*?") &&
			globFold([]byte(strings.ToLower(pq.Host)), []byte(host)) != strings.EqualFold(pq.Host, host) {
			t.Fatalf("glob without wildcards %q vs %q disagrees with EqualFold", pq.Host, host)
		}
	})
}

// FuzzRecord: a decoded record equals what was encoded, and arbitrary bytes
// never panic the decoder.
func FuzzRecord(f *testing.F) {
	f.Add([]byte("garbage"), "cn01", "text")
	f.Fuzz(func(t *testing.T, junk []byte, host, text string) {
		var v view
		_, _ = nextRecord(junk, &v)
		r := Record{Seq: 7, Time: t0, Received: t0, Host: host, Text: text, Severity: 3, Pattern: 9}
		b := appendRecord(junk[:0:0], &r)
		n, err := nextRecord(b, &v)
		if err != nil || n != len(b) {
			t.Fatalf("round trip: n %d of %d, err %v", n, len(b), err)
		}
		got := v.record()
		if got.Host != host || got.Text != text || got.Seq != 7 || got.Pattern != 9 || !got.Time.Equal(t0) {
			t.Fatalf("round trip: %+v", got)
		}
	})
}
