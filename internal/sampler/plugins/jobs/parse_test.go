package jobs

import (
	"slices"
	"strings"
	"testing"
)

func TestCountCPUs(t *testing.T) {
	for in, want := range map[string]int{"0-3,8\n": 5, "0": 1, "": 0, "\n": 0, "16,18": 2, "0-127": 128, "2-2": 1} {
		if got, err := countCPUs([]byte(in)); err != nil || got != want {
			t.Errorf("countCPUs(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"3-1", "a", "0-", "-1", "1,,2", "0-99999999", "1 2"} {
		if _, err := countCPUs([]byte(in)); err == nil {
			t.Errorf("countCPUs(%q) accepted", in)
		}
	}
}

func TestParseKeyed(t *testing.T) {
	var out [2]uint64
	found, err := parseKeyed([]byte("anon 5\nfile 7\nshmem 3\n\nanon_thp 9\n"), []string{"anon", "shmem"}, out[:])
	if err != nil || found != 3 || out != [2]uint64{5, 3} {
		t.Errorf("parseKeyed = %b %v %v", found, out, err)
	}
	found, err = parseKeyed([]byte("anon 5\n"), []string{"anon", "shmem"}, out[:])
	if err != nil || found != 1 {
		t.Errorf("missing key: found %b, err %v", found, err)
	}
	if _, err := parseKeyed([]byte("anon -5\n"), []string{"anon"}, out[:]); err == nil || !strings.Contains(err.Error(), `anon "-5"`) {
		t.Errorf("negative count: err = %v", err)
	}
	// Keys not asked for are not parsed.
	if found, err := parseKeyed([]byte("junk x\nanon 1"), []string{"anon"}, out[:]); err != nil || found != 1 {
		t.Errorf("unasked bad line: %b %v", found, err)
	}
}

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		in      string
		v       uint64
		ok, bad bool
	}{
		{"max\n", 0, false, false},
		{"17179869184\n", 17179869184, true, false},
		{"9223372036854771712\n", 0, false, false},
		{"x", 0, false, true},
	} {
		v, ok, err := parseLimit([]byte(tc.in))
		if (err != nil) != tc.bad || ok != tc.ok || ok && v != tc.v {
			t.Errorf("parseLimit(%q) = %d %v %v", tc.in, v, ok, err)
		}
	}
}

func TestParseIOStat(t *testing.T) {
	rd, wr, err := parseIOStat([]byte("8:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n253:1 rbytes=5 wbytes=1\n\n"))
	if err != nil || rd != 15 || wr != 21 {
		t.Errorf("parseIOStat = %d %d %v", rd, wr, err)
	}
	for _, in := range []string{"8:0 rbytes\n", "8:0 rbytes=x\n"} {
		if _, _, err := parseIOStat([]byte(in)); err == nil {
			t.Errorf("parseIOStat(%q) accepted", in)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	var pids []int32
	n, err := parsePIDs([]byte("10\n20\n\n30\n"), &pids, 2)
	if err != nil || n != 3 || !slices.Equal(pids, []int32{10, 20}) {
		t.Errorf("parsePIDs = %d %v %v, want 3 lines, the first 2 pids", n, pids, err)
	}
	if _, err := parsePIDs([]byte("0\n"), &pids, 10); err == nil {
		t.Error("pid 0 accepted")
	}
	if n, err := parsePIDs([]byte("x\ny\n"), nil, 0); err != nil || n != 2 {
		t.Errorf("counting only: %d %v", n, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("anon 1\nshmem 2\n"))
	f.Add([]byte("0-3,8"))
	f.Add([]byte("8:0 rbytes=1 wbytes=2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out [3]uint64
		_, _ = parseKeyed(data, []string{"a", "b", "c"}, out[:])
		if n, err := countCPUs(data); err == nil && n < 0 {
			t.Fatalf("negative cpu count")
		}
		_, _, _ = parseIOStat(data)
		_, _, _ = parseLimit(data)
		var pids []int32
		if n, err := parsePIDs(data, &pids, 4); err == nil && len(pids) > n {
			t.Fatalf("more pids than lines")
		}
		_, _ = parseID(data, "job_")
		_, _, _ = parseIO(data)
	})
}
