package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// gen makes n records: host cnNN (i%4), app sshd or slurmd, severity i%8,
// pattern i%3+1, one second apart from start, text naming i.
func gen(start time.Time, from, n int) []Record {
	recs := make([]Record, n)
	for k := range recs {
		i := from + k
		app := "sshd"
		if i%2 == 1 {
			app = "slurmd"
		}
		recs[k] = Record{
			Time:     start.Add(time.Duration(i) * time.Second),
			Received: start.Add(time.Duration(i) * time.Second),
			Host:     fmt.Sprintf("cn%02d", i%4),
			App:      app,
			Severity: uint8(i % 8),
			Pattern:  uint64(i%3 + 1),
			Text:     fmt.Sprintf("Message number %d of the Test", i),
		}
	}
	return recs
}

func open(t *testing.T, dir string, mod func(*Options)) *Store {
	t.Helper()
	o := Options{Dir: dir, SegmentBytes: 4 << 10}
	if mod != nil {
		mod(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func texts(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Text
	}
	return out
}

func TestAppendSearchReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil)
	for b := 0; b < 10; b++ {
		if err := s.Append(gen(t0, b*100, 100)); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Records != 1000 || st.LastSeq != 1000 || st.Segments < 5 {
		t.Fatalf("stats after 1000 records in 4 KiB segments: %+v", st)
	}
	check := func(s *Store) {
		t.Helper()
		recs, next, err := s.Search(Query{}, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"Message number 999 of the Test", "Message number 998 of the Test", "Message number 997 of the Test"}
		if strings.Join(texts(recs), "|") != strings.Join(want, "|") || next != 998 {
			t.Fatalf("newest 3: %q next %d", texts(recs), next)
		}
		if recs[0].Host != "cn03" || recs[0].App != "slurmd" || recs[0].Severity != 7 || recs[0].Pattern != 1 || !recs[0].Time.Equal(t0.Add(999*time.Second)) {
			t.Fatalf("record fields: %+v", recs[0])
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, nil)
	check(s2)
	if err := s2.Append(gen(t0, 1000, 1)); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := s2.Search(Query{}, 0, 1); len(recs) != 1 || recs[0].Seq != 1001 {
		t.Fatalf("append after reopen: %+v", recs)
	}
}

func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, func(o *Options) { o.SegmentBytes = 1 << 20 })
	if err := s.Append(gen(t0, 0, 10)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Half a record, as a crash during write leaves it.
	torn := appendRecord(nil, &gen(t0, 10, 1)[0])
	f.Write(torn[:len(torn)/2])
	f.Close()

	s2 := open(t, dir, nil)
	if st := s2.Stats(); st.Records != 10 {
		t.Fatalf("records after torn tail: %d, want 10", st.Records)
	}
	if err := s2.Append(gen(t0, 10, 1)); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s3 := open(t, dir, nil)
	recs, _, err := s3.Search(Query{}, 0, 100)
	if err != nil || len(recs) != 11 || recs[0].Text != "Message number 10 of the Test" {
		t.Fatalf("after rewrite over torn tail: %d records, err %v", len(recs), err)
	}
}

func TestSearchFilters(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	if err := s.Append(gen(t0, 0, 400)); err != nil {
		t.Fatal(err)
	}
	all, _, _ := s.Search(Query{}, 0, 1000)
	if len(all) != 400 {
		t.Fatalf("all: %d", len(all))
	}
	cases := []struct {
		q    string
		from time.Time
		keep func(r Record) bool
	}{
		{"host:cn01", time.Time{}, func(r Record) bool { return r.Host == "cn01" }},
		{"host:CN0[", time.Time{}, func(r Record) bool { return false }},
		{"host:cn0?", time.Time{}, func(r Record) bool { return true }},
		{"host:*3", time.Time{}, func(r Record) bool { return r.Host == "cn03" }},
		{"app:slurm*", time.Time{}, func(r Record) bool { return r.App == "slurmd" }},
		{"severity:warning", time.Time{}, func(r Record) bool { return r.Severity <= 4 }},
		{"sev:0", time.Time{}, func(r Record) bool { return r.Severity == 0 }},
		{"pattern:2", time.Time{}, func(r Record) bool { return r.Pattern == 2 }},
		{`"number 12 " test`, time.Time{}, func(r Record) bool { return strings.Contains(r.Text, "number 12 ") }},
		{"number 1?", time.Time{}, func(r Record) bool { return false }},
		{"host:cn02 app:sshd severity:err", time.Time{}, func(r Record) bool {
			return r.Host == "cn02" && r.App == "sshd" && r.Severity <= 3
		}},
		{"", t0.Add(350 * time.Second), func(r Record) bool { return !r.Time.Before(t0.Add(350 * time.Second)) }},
	}
	for _, c := range cases {
		t.Run(c.q, func(t *testing.T) {
			q, err := ParseQuery(c.q)
			if err != nil {
				t.Fatal(err)
			}
			q.From = c.from
			got, _, err := s.Search(q, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, r := range all {
				if c.keep(r) {
					want = append(want, r.Text)
				}
			}
			if strings.Join(texts(got), "|") != strings.Join(want, "|") {
				t.Fatalf("query %q: got %d records, want %d\n got %q", c.q, len(got), len(want), texts(got))
			}
		})
	}
}

func TestPagination(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	for b := 0; b < 5; b++ {
		if err := s.Append(gen(t0, b*97, 97)); err != nil {
			t.Fatal(err)
		}
	}
	q, _ := ParseQuery("host:cn01")
	var seen []uint64
	var before uint64
	for page := 0; ; page++ {
		recs, next, err := s.Search(q, before, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Host != "cn01" {
				t.Fatalf("host %q", r.Host)
			}
			if len(seen) > 0 && r.Seq >= seen[len(seen)-1] {
				t.Fatalf("page %d not newest first: %d after %d", page, r.Seq, seen[len(seen)-1])
			}
			seen = append(seen, r.Seq)
		}
		if next == 0 {
			break
		}
		before = next
	}
	// 485 records, hosts round-robin from i=0: cn01 at i%4==1.
	if len(seen) != 121 || seen[0] != 482 || seen[len(seen)-1] != 2 {
		t.Fatalf("paged %d records, first %d last %d; want 121 from 482 to 2", len(seen), seen[0], seen[len(seen)-1])
	}
}

func TestAfter(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	if err := s.Append(gen(t0, 0, 300)); err != nil {
		t.Fatal(err)
	}
	q, _ := ParseQuery("host:cn00")
	var got []uint64
	var after uint64
	for {
		recs, upTo, err := s.After(after, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.Seq)
		}
		if upTo == after {
			break
		}
		after = upTo
	}
	if len(got) != 75 || got[0] != 1 || got[74] != 297 {
		t.Fatalf("after: %d records %v", len(got), got)
	}
	ch := s.Changed()
	select {
	case <-ch:
		t.Fatal("changed before append")
	default:
	}
	s.Append(gen(t0, 300, 1))
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by Append")
	}
}

func TestRetention(t *testing.T) {
	now := t0
	dir := t.TempDir()
	s := open(t, dir, func(o *Options) {
		o.Retention = time.Hour
		o.Now = func() time.Time { return now }
	})
	for b := 0; b < 20; b++ {
		if err := s.Append(gen(t0, b*100, 100)); err != nil {
			t.Fatal(err)
		}
	}
	before := s.Stats()
	// Records were received t0 .. t0+2000s; at t0+1h+1000s those up to 999 expire.
	now = t0.Add(time.Hour + 1000*time.Second)
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	after := s.Stats()
	if after.Segments >= before.Segments || after.FirstSeq <= 1 || after.FirstSeq > 1001 || after.LastSeq != 2000 {
		t.Fatalf("time retention: before %+v after %+v", before, after)
	}
	recs, _, _ := s.Search(Query{}, 0, 5000)
	if len(recs) != int(after.Records) || recs[len(recs)-1].Seq != after.FirstSeq {
		t.Fatalf("search after retention: %d records, stats %+v", len(recs), after)
	}
	// Everything expires, the active segment too.
	now = t0.Add(48 * time.Hour)
	if err := s.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Records != 0 || st.LastSeq != 2000 {
		t.Fatalf("all expired: %+v", st)
	}
	if err := s.Append(gen(now, 0, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st := open(t, dir, nil).Stats(); st.Records != 1 || st.LastSeq != 2001 {
		t.Fatalf("reopen after full expiry: %+v (sequence numbers must not be reused)", st)
	}
}

func TestSizeRetention(t *testing.T) {
	s := open(t, t.TempDir(), func(o *Options) { o.MaxBytes = 20 << 10 })
	for b := 0; b < 30; b++ {
		if err := s.Append(gen(t0, b*50, 50)); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	// One segment may overshoot by a batch; the total stays near the bound.
	if st.Bytes > 20<<10+8<<10 || st.LastSeq != 1500 || st.Records == 0 {
		t.Fatalf("size retention: %+v", st)
	}
}

func TestParseQueryErrors(t *testing.T) {
	for q, want := range map[string]string{
		"hots:cn01":     `unknown filter "hots"`,
		"severity:loud": `unknown severity "loud"`,
		"pattern:x":     "pattern:x: want a pattern id",
		`"open`:         "unterminated quote",
		"host:":         "empty value for host:",
		`host:"cn01 `:   "unterminated quote after host:",
	} {
		_, err := ParseQuery(q)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseQuery(%q) error %v, want %q", q, err, want)
		}
	}
	q, err := ParseQuery(`host:"cn 01" 10:00 error: "a b"`)
	if err != nil || q.Host != "cn 01" || strings.Join(q.Terms, "|") != "10:00|error:|a b" {
		t.Fatalf("ParseQuery: %+v %v", q, err)
	}
}
