package pattern_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/pattern"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// fixedClock returns a clock that advances one second per call.
func fixedClock() func() time.Time {
	t := time.Unix(1700000000, 0)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func newMiner(cfg pattern.Config) *pattern.Miner {
	if cfg.Now == nil {
		cfg.Now = fixedClock()
	}
	return pattern.New(cfg)
}

func mustTemplate(t *testing.T, m *pattern.Miner, id uint64) string {
	t.Helper()
	tpl, ok := m.Template(id)
	if !ok {
		t.Fatalf("Template(%d): no such pattern", id)
	}
	return tpl
}

func TestVariablesShareTemplate(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{
			lines: []string{
				"Node 12 power budget exceeded! Power=310, Limit=300",
				"Node 7 power budget exceeded! Power=402, Limit=350",
			},
			want: "Node <*> power budget exceeded! Power=<*>, Limit=<*>",
		},
		{
			lines: []string{
				"connection from 10.0.0.1 (node1.example.org) at Sun Jul 10 03:55:15 2005",
				"connection from 10.0.0.2 () at Mon Jun 4 13:05:00 2005",
			},
			want: "connection from <*> (<*>) at <*>:<*>:<*>",
		},
		{
			lines: []string{
				// Names are values once MinVariants (4) of them occur.
				"session opened for user alice by (uid=0)",
				"session opened for user bob by (uid=0)",
				"session opened for user carol by (uid=0)",
				"session opened for user dave by (uid=0)",
			},
			want: "session opened for user <*> by (uid=<*>)",
		},
		{
			// A size in parentheses and a unit after a number do not
			// change the event.
			lines: []string{
				"proxy.example.org:5070 close, 451 bytes sent, 18846 bytes (18.4 KB) received, lifetime <1 sec",
				"www.example.com:443 close, 0 bytes sent, 0 bytes received, lifetime 00:01",
			},
			want: "<*>:<*> close, <*> bytes sent, <*> bytes received, lifetime <*>",
		},
	} {
		m := newMiner(pattern.Config{})
		var ids []uint64
		for _, l := range tc.lines {
			id, _ := m.Add([]byte(l))
			ids = append(ids, id)
		}
		for i, id := range ids {
			if id, _ = m.Resolve(id); id != ids[0] {
				t.Errorf("%q got id %d, %q got %d: want one pattern", tc.lines[i], id, tc.lines[0], ids[0])
			}
		}
		if got := mustTemplate(t, m, ids[0]); got != tc.want {
			t.Errorf("template = %q, want %q", got, tc.want)
		}
	}
}

// TestDifferentEventsDiffer: fewer alternatives than Config.MinVariants (4)
// at one position are separate events.
func TestDifferentEventsDiffer(t *testing.T) {
	m := newMiner(pattern.Config{})
	lines := []string{
		"[instance: 1] VM Paused (Lifecycle Event)",
		"[instance: 2] VM Resumed (Lifecycle Event)",
		"[instance: 3] VM Started (Lifecycle Event)",
		"h:1 open through proxy p:2 SOCKS5",
		"h:1 open through proxy p:2 HTTPS",
		"Starting the TrustedInstaller main loop.",
		"Ending the TrustedInstaller main loop.",
		"jemmytest",
		"suspendAutohide",
	}
	seen := map[uint64]string{}
	for _, l := range lines {
		id, isNew := m.Add([]byte(l))
		if !isNew {
			t.Errorf("%q: isNew = false, want a new pattern", l)
		}
		if prev, ok := seen[id]; ok {
			t.Errorf("%q and %q share pattern %d", l, prev, id)
		}
		seen[id] = l
	}
	m.Merge()
	if got := m.Len(); got != len(lines) {
		t.Errorf("after Merge: %d patterns, want %d", got, len(lines))
	}
}

func TestNewFlagAndCounts(t *testing.T) {
	m := newMiner(pattern.Config{MaxExamples: 2})
	id1, new1 := m.Add([]byte("disk /dev/sda1 is 91% full"))
	id2, new2 := m.Add([]byte("disk /dev/sdb2 is 97% full"))
	id3, new3 := m.Add([]byte("disk /dev/sdb2 is 97% full"))
	if !new1 || new2 || new3 {
		t.Errorf("isNew = %v %v %v, want true false false", new1, new2, new3)
	}
	if id1 != id2 || id2 != id3 {
		t.Fatalf("ids %d %d %d, want one", id1, id2, id3)
	}
	p, ok := m.Pattern(id1)
	if !ok {
		t.Fatal("Pattern: missing")
	}
	if p.Count != 3 || len(p.Examples) != 2 || p.Examples[0] != "disk /dev/sda1 is 91% full" {
		t.Errorf("pattern = %+v, want count 3 and the first 2 examples", p)
	}
	if !p.LastSeen.After(p.FirstSeen) {
		t.Errorf("first seen %v, last seen %v", p.FirstSeen, p.LastSeen)
	}
}

// TestManyVariantsMerge checks that a word position with many values
// becomes a wildcard, and that the old ids follow the merge.
// TestNumberedInstances: words that differ only in their number ("ib0",
// "ib1") are one value even with fewer than MinVariants of them.
func TestNumberedInstances(t *testing.T) {
	m := newMiner(pattern.Config{})
	a, _ := m.Add([]byte("mlx5_core 0000:3b:00.0 ib0: Link down"))
	b, _ := m.Add([]byte("mlx5_core 0000:5e:00.0 ib1: Link down"))
	c, _ := m.Add([]byte("mlx5_core 0000:5e:00.0 ib1: Link up"))
	m.Merge()
	if ra, _ := m.Resolve(a); ra != mustResolve(t, m, b) {
		t.Errorf("ib0 and ib1 messages: patterns %d and %d, want one", a, b)
	}
	if got := mustTemplate(t, m, a); got != "mlx5_core <*>:<*>:<*> <*> Link down" {
		t.Errorf("template %q", got)
	}
	if mustResolve(t, m, c) == mustResolve(t, m, a) {
		t.Error("Link up and Link down share a pattern")
	}
}

func mustResolve(t *testing.T, m *pattern.Miner, id uint64) uint64 {
	t.Helper()
	r, ok := m.Resolve(id)
	if !ok {
		t.Fatalf("id %d unknown", id)
	}
	return r
}

func TestManyVariantsMerge(t *testing.T) {
	m := newMiner(pattern.Config{MinVariants: 5})
	var ids []uint64
	for _, u := range []string{"root", "admin", "oracle", "guest", "ftp"} {
		id, _ := m.Add([]byte("Failed password for " + u + " from 10.0.0.1 port 22 ssh2"))
		ids = append(ids, id)
	}
	want := "Failed password for <*> from <*> port <*> ssh2"
	for _, id := range ids {
		if got := mustTemplate(t, m, id); got != want {
			t.Errorf("id %d: template %q, want %q", id, got, want)
		}
		if r, _ := m.Resolve(id); r != ids[0] {
			t.Errorf("Resolve(%d) = %d, want the oldest id %d", id, r, ids[0])
		}
	}
	if m.Len() != 1 {
		t.Errorf("%d patterns, want 1", m.Len())
	}
	if p, _ := m.Pattern(ids[0]); p.Count != 5 {
		t.Errorf("count %d, want 5", p.Count)
	}
}

func TestSaveLoadKeepsIDs(t *testing.T) {
	m := newMiner(pattern.Config{})
	lines := []string{
		"Accepted password for alice from 10.0.0.1 port 22 ssh2",
		"Received disconnect from 10.0.0.9: 11: Bye Bye [preauth]",
		"odd \x00\xff bytes \"quoted\"",
	}
	ids := map[string]uint64{}
	for _, l := range lines {
		ids[l], _ = m.Add([]byte(l))
	}
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		m.Add([]byte("Invalid user x from h ssh " + u))
	}
	aliasID, _ := m.Add([]byte("Invalid user x from h ssh f"))
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		t.Fatal(err)
	}
	m2 := newMiner(pattern.Config{})
	if err := m2.Load(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("Load: %v\n%s", err, buf.String())
	}
	for l, id := range ids {
		id2, isNew := m2.Add([]byte(l))
		if id2 != id || isNew {
			t.Errorf("%q after Load: id %d new %v, want id %d not new", l, id2, isNew, id)
		}
	}
	if a, b := mustTemplate(t, m, aliasID), mustTemplate(t, m2, aliasID); a != b {
		t.Errorf("alias %d: template %q after Load, want %q", aliasID, b, a)
	}
	id, isNew := m2.Add([]byte("a brand new event"))
	if !isNew || id <= aliasID {
		t.Errorf("new pattern after Load: id %d new %v, want a fresh id", id, isNew)
	}
	var buf2 bytes.Buffer
	if err := m2.Save(&buf2); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf2.String(), `"odd \x00\xff bytes \"quoted\""`) {
		t.Errorf("saved state lost an odd example:\n%s", buf2.String())
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "empty input"},
		{"magic", "hello 1\n", "not a pattern state"},
		{"version", "vigil-patterns 9\n", "unsupported version"},
		{"next", "vigil-patterns 1\nnext x\n", "bad next id"},
		{"fields", "vigil-patterns 1\nnext 5\np 1 2 3 4\n", "5 fields"},
		{"negative", "vigil-patterns 1\nnext 5\np 1 2 3 4 -1\n", "bad number"},
		{"no tokens", "vigil-patterns 1\nnext 5\np 1 2 3 4 1\n", "want tokens"},
		{"dup", "vigil-patterns 1\nnext 5\np 1 2 3 4 1\nt \"a\"\np 1 2 3 4 1\nt \"b\"\n", "duplicate"},
		{"id too big", "vigil-patterns 1\nnext 5\np 7 2 3 4 1\nt \"a\"\n", "duplicate"},
		{"bad quote", "vigil-patterns 1\nnext 5\np 1 2 3 4 1\nt \"a\n", "bad quoted"},
		{"newline token", "vigil-patterns 1\nnext 5\np 1 2 3 4 1\nt \"a\\nb\"\n", "bad token"},
		{"record", "vigil-patterns 1\nnext 5\nz\n", "unknown record"},
		{"alias", "vigil-patterns 1\nnext 5\np 1 2 3 4 1\nt \"a\"\na 1\n", "duplicate alias"},
	} {
		err := newMiner(pattern.Config{}).Load(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, pattern.ErrFormat) {
			t.Errorf("%s: err = %v, want ErrFormat containing %q", tc.name, err, tc.want)
		}
	}
	m := newMiner(pattern.Config{})
	m.Add([]byte("x"))
	if err := m.Load(strings.NewReader("vigil-patterns 1\nnext 2\n")); err == nil {
		t.Error("Load into a non-empty miner: want an error")
	}
}

func TestBoundedMemory(t *testing.T) {
	m := newMiner(pattern.Config{MaxPatterns: 10, MaxSignatures: 20})
	var first uint64
	for i := range 1000 {
		// Distinct words everywhere, no digits: every line is its own
		// event.
		id, _ := m.Add([]byte(word(i) + " " + word(i+5000) + " " + word(i+9000)))
		if i == 0 {
			first = id
		}
		if m.Len() > 10 {
			t.Fatalf("after %d lines: %d patterns, bound 10", i+1, m.Len())
		}
	}
	if _, ok := m.Template(first); ok {
		t.Error("the least recently used pattern was not evicted")
	}
	// Recently used patterns survive.
	id, isNew := m.Add([]byte(word(999) + " " + word(999+5000) + " " + word(999+9000)))
	if isNew {
		t.Errorf("recent pattern %d was evicted", id)
	}
}

// word spells i in letters, so the tokenizer does not mask it.
func word(i int) string {
	var b []byte
	for {
		b = append(b, byte('a'+i%26))
		i /= 26
		if i == 0 {
			return "w" + string(b) + "x"
		}
	}
}

func TestHostileInput(t *testing.T) {
	m := newMiner(pattern.Config{MaxTokens: 8})
	for _, l := range []string{
		"", " ", "\t\t", "(", "(1 KB", "(1 KB) x", "a=", "=1", "user", "user user user",
		strings.Repeat("x ", 10000), strings.Repeat("9", 100000), "\xff\xfe\x00 bad utf8 \xc3",
	} {
		id, _ := m.Add([]byte(l))
		tpl := mustTemplate(t, m, id)
		if strings.ContainsAny(tpl, "\n") || len(strings.Fields(tpl)) > 8 {
			t.Errorf("%.20q: template %.60q", l, tpl)
		}
	}
}

// TestGolden mines a sample of LogHub messages (testdata/loghub.txt, 15
// lines spread over each of the 13 systems) and compares each line's final
// template with testdata/loghub.want; -update rewrites it.
func TestGolden(t *testing.T) {
	in, err := os.ReadFile("testdata/loghub.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(in), "\n"), "\n")
	m := newMiner(pattern.Config{})
	ids := make([]uint64, len(lines))
	for i, l := range lines {
		ids[i], _ = m.Add([]byte(l))
	}
	m.Merge()
	var out bytes.Buffer
	for _, id := range ids {
		fmt.Fprintln(&out, mustTemplate(t, m, id))
	}
	testutil.Golden(t, "testdata/loghub.want", out.Bytes())
}

func FuzzMiner(f *testing.F) {
	f.Add([]byte("Node 12 power budget exceeded! Power=310, Limit=300\nNode 7 power budget exceeded! Power=402, Limit=350"))
	f.Add([]byte("x (1.5 KB) y\n(2 KB) \n user \n\xff"))
	f.Add([]byte("a b c\na b d\na b e\na b f\na b g\na b h"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMiner(pattern.Config{MaxPatterns: 4, MaxSignatures: 8, MaxTokens: 16, MinVariants: 2})
		lines := bytes.Split(data, []byte("\n"))
		ids := make([]uint64, len(lines))
		for i, l := range lines {
			ids[i], _ = m.Add(l)
			if _, ok := m.Template(ids[i]); !ok {
				t.Fatalf("line %d: id %d has no template right after Add", i, ids[i])
			}
		}
		m.Merge()
		if m.Len() > 4 {
			t.Fatalf("%d patterns, bound 4", m.Len())
		}
		for _, id := range ids {
			if tpl, ok := m.Template(id); ok && strings.Contains(tpl, "\n") {
				t.Fatalf("template %q", tpl)
			}
		}
		var buf bytes.Buffer
		if err := m.Save(&buf); err != nil {
			t.Fatal(err)
		}
		m2 := newMiner(pattern.Config{MaxPatterns: 4, MaxTokens: 16})
		if err := m2.Load(&buf); err != nil {
			t.Fatalf("Load(Save()) = %v", err)
		}
		if m2.Len() != m.Len() {
			t.Fatalf("Load(Save()): %d patterns, want %d", m2.Len(), m.Len())
		}
		// Arbitrary bytes as a state file must not panic.
		_ = newMiner(pattern.Config{}).Load(bytes.NewReader(data))
	})
}

// loghubFiles lists the shared LogHub samples, when present: under
// $VIGIL_LOGHUB_DIR, or ../shared/datasets/loghub next to the checkout.
func loghubFiles(tb testing.TB) []string {
	dir := os.Getenv("VIGIL_LOGHUB_DIR")
	if dir == "" {
		dir = "../../../../shared/datasets/loghub"
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*/*_2k.log_structured_corrected.csv"))
	if len(files) == 0 {
		tb.Skipf("LogHub samples not found under %s (set VIGIL_LOGHUB_DIR)", dir)
	}
	return files
}

// readContent returns the Content column of a LogHub structured CSV.
func readContent(tb testing.TB, path string) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	col := -1
	for i, h := range recs[0] {
		if h == "Content" {
			col = i
		}
	}
	if col < 0 {
		tb.Fatalf("%s: no Content column", path)
	}
	var out [][]byte
	for _, rec := range recs[1:] {
		out = append(out, []byte(rec[col]))
	}
	return out
}

func BenchmarkMiner(b *testing.B) {
	var lines [][]byte
	for _, f := range loghubFiles(b) {
		lines = append(lines, readContent(b, f)...)
	}
	b.Run(fmt.Sprintf("loghub_lines=%d", len(lines)), func(b *testing.B) {
		b.ReportAllocs()
		now := time.Unix(1700000000, 0)
		var n int
		cpu0 := cpuSeconds()
		for b.Loop() {
			m := pattern.New(pattern.Config{})
			for _, l := range lines {
				m.AddAt(now, l)
			}
			m.Merge()
			n += len(lines)
		}
		reportRates(b, n, cpu0)
	})
	// Steady state: the miner has seen the data once; what a long-running
	// intake pays per message.
	b.Run("steady", func(b *testing.B) {
		b.ReportAllocs()
		m := pattern.New(pattern.Config{})
		now := time.Unix(1700000000, 0)
		for _, l := range lines {
			m.AddAt(now, l)
		}
		i := 0
		cpu0 := cpuSeconds()
		for b.Loop() {
			m.AddAt(now, lines[i])
			if i++; i == len(lines) {
				i = 0
			}
		}
		reportRates(b, b.N, cpu0)
	})
}

func reportRates(b *testing.B, lines int, cpu0 float64) {
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
	if cpu := cpuSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(float64(lines)/cpu, "lines/cpu-s")
	}
}

// TestMasking pins the source-independent masking rules: each message is
// mined alone, so its template shows exactly what the tokenizer masked.
func TestMasking(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"took 12 ms", "took <*> ms"},                                                 // a fixed unit stays
		{"size 6.0 KB, free 1.2 MB)", "size <*>, free <*>)"},                          // a human-readable size is one value
		{"sent 5174 bytes (5.05 KB) ok", "sent <*> bytes ok"},                         // numeric aside dropped
		{"Failed password for x port 22 ssh2", "Failed password for x port <*> ssh2"}, // versioned name kept
		{"link IPV6 up", "link IPV6 up"},
		{"isOverlap:false flag=true v=null", "isOverlap:<*> flag=<*> v=<*>"},
		{"(uid=0), ws=WorkSource{10020},", "(uid=<*>), ws=WorkSource{<*>},"},
		{"open /var/log/x and com.example.app/.Main", "open <*> and <*>"},
		{"from massive.merukuru.org now", "from <*> now"},
		{"class org.apache.Foo loaded", "class org.apache.Foo loaded"},  // dotted, but not a host name
		{"at Sun Jul 10 03:55:15 2005 in May", "at <*>:<*>:<*> in May"}, // adjacent values join
		{"check pass; user unknown", "check pass; user unknown"},        // no word is special
		{"mask=ffffffff colour", "mask=<*> colour"},
		{"connection () at x", "connection (<*>) at x"},
		{"delete blk_1 blk_2 blk_3 blk_4", "delete <*>"}, // trailing list folded
		{"lifetime <1 sec", "lifetime <*>"},
		// Parts of a token: separators, keys and calls stay.
		{"from /10.0.0.1:22 to node-7:8030.", "from <*>:<*> to <*>:<*>."},
		{"retry policy Fixed(maxRetries=10, sleepTime=1000 MILLISECONDS)", "retry policy Fixed(maxRetries=<*>, sleepTime=<*> MILLISECONDS)"},
		{"split: hdfs://10.0.0.1:9000/a/b.log:1+2", "split: hdfs://<*>"},
		{"steps=1514046240000##0##549659", "steps=<*>##<*>##<*>"},
		{"jk2_init() found mlx5_core x86_64", "jk2_init() found mlx5_core <*>"}, // names with short numbers stay
		{"workerEnv.init() ok NameSystem.delete: x", "workerEnv.init() ok NameSystem.delete: x"},
		{"headroom=<memory:0, vCores:-27>", "headroom=<memory:<*>, vCores:<*>"},
		{`"GET /v2/servers/detail HTTP/1.1" status: 200`, `"GET <*>" status: <*>`},
		// Brackets stay balanced: the logs view showed "<*>] dealloc".
		{"taskID[2019352994] dealloc", "taskID[<*>] dealloc"},
		{"agent[39159/0x7000002a0000] [lvl=2] main() exiting.", "agent[<*>] [lvl=<*>] main() exiting."},
		{`acquire tag="View Lock", name=x`, `acquire tag="View Lock", name=x`}, // a quoted value is one token
		{`tag="unclosed value`, `tag="unclosed value`},
	} {
		m := newMiner(pattern.Config{})
		id, _ := m.Add([]byte(tc.in))
		if got := mustTemplate(t, m, id); got != tc.want {
			t.Errorf("%q: template %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAddAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	m := newMiner(pattern.Config{})
	msgs := [][]byte{
		[]byte("Accepted password for alice from 10.0.0.1 port 22 ssh2"),
		[]byte("session opened for user bob by (uid=0)"),
	}
	now := time.Unix(1700000000, 0)
	for _, msg := range msgs {
		m.AddAt(now, msg)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		m.AddAt(now, msgs[i%len(msgs)])
		i++
	}); n != 0 {
		t.Errorf("Add of a known message: %v allocs, want 0", n)
	}
}

// TestKeyValueVariants checks the key=value rule: values that vary together
// in several tokens, quoted values with blanks included, fold once enough
// variants occur, and not before.
func TestKeyValueVariants(t *testing.T) {
	m := newMiner(pattern.Config{MinVariants: 5})
	tags := []string{`"View Lock"`, `"AudioMix"`, `"RILJ ACK WL"`, `"launch"`, `"a b c d"`}
	names := []string{"systemui", "audioserver", "phone", "android", "x"}
	var ids []uint64
	for i := range tags {
		id, _ := m.Add([]byte("acquire lock=1, tag=" + tags[i] + ", name=" + names[i] + ", uid=7"))
		ids = append(ids, id)
		if i < len(tags)-1 && m.Len() != i+1 {
			t.Fatalf("after %d variants: %d patterns, want %d (no fold yet)", i+1, m.Len(), i+1)
		}
	}
	if m.Len() != 1 {
		t.Fatalf("%d patterns after %d variants, want 1", m.Len(), len(tags))
	}
	want := `acquire lock=<*>, tag="<*>", name=<*>, uid=<*>`
	for _, id := range ids {
		if got := mustTemplate(t, m, id); got != want {
			t.Errorf("id %d: %q, want %q", id, got, want)
		}
	}
}

// TestLoadOlderState loads patterns saved by the previous version
// (testdata/state-v1.txt, from the messages in state-v1.msgs) and mines the
// same messages again: those whose tokens still fit their old template keep
// their id; those the current rules split differently (a fixed unit after a
// number, a call name that is no longer a value) start a new pattern, and
// the old one stays until it ages out.
func TestLoadOlderState(t *testing.T) {
	state, err := os.ReadFile("testdata/state-v1.txt")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := os.ReadFile("testdata/state-v1.msgs")
	if err != nil {
		t.Fatal(err)
	}
	m := newMiner(pattern.Config{})
	if err := m.Load(bytes.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(msgs)), "\n")
	changed := map[string]bool{
		"Reading broadcast variable 40 took 10 ms":         true,
		"jk2_init() Found child 6790 in scoreboard slot 7": true,
	}
	for i, l := range lines {
		id, isNew := m.Add([]byte(l))
		old := uint64(i + 1) // saved in message order from id 1
		if changed[l] {
			if id == old || !isNew {
				t.Errorf("%q: id %d (new %v), want a new pattern", l, id, isNew)
			}
			continue
		}
		if id != old {
			t.Errorf("%q: id %d, want its saved id %d", l, id, old)
		}
	}
	if _, ok := m.Template(8); !ok {
		t.Error("old pattern 8 dropped at once, want it kept until it ages out")
	}
}

// TestFirstSeenSurvivesMerge: when a new message's pattern is folded into
// an older one at once, the older one keeps its first-seen time (the new
// pattern, still without a count, used to zero it).
func TestFirstSeenSurvivesMerge(t *testing.T) {
	m := pattern.New(pattern.Config{})
	t0 := time.Unix(1_700_000_000, 0)
	var id uint64
	for i := range 6 {
		id, _ = m.AddAt(t0.Add(time.Duration(i)*time.Second), fmt.Appendf(nil, "kernel: port ib%d: Link down", i))
	}
	p, ok := m.Pattern(id)
	if !ok || p.Count != 6 || !strings.Contains(p.Template, "<*>") {
		t.Fatalf("want the messages folded into one pattern, have %+v", p)
	}
	if !p.FirstSeen.Equal(t0) || !p.LastSeen.Equal(t0.Add(5*time.Second)) {
		t.Errorf("first seen %v, last seen %v; want %v and 5 s later", p.FirstSeen, p.LastSeen, t0)
	}
}
