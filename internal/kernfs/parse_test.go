package kernfs

import (
	"fmt"
	"math"
	"strconv"
	"testing"
)

func TestParseUint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		bad  bool
	}{
		{in: "0"}, {in: "42", want: 42},
		{in: "18446744073709551615", want: math.MaxUint64},
		{in: "18446744073709551616", bad: true},
		{in: "9999999999999999999", want: 9999999999999999999},
		{in: "", bad: true}, {in: "-1", bad: true}, {in: "1x", bad: true},
	} {
		got, err := ParseUint([]byte(tc.in))
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("ParseUint(%q) = %v, %v", tc.in, got, err)
		}
	}
}

func TestParseFixed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "0.52", want: 0.52}, {in: "12", want: 12}, {in: "-1.5", want: -1.5},
		{in: "1.", bad: true}, {in: "", bad: true}, {in: "a", bad: true}, {in: "1.2.3", bad: true},
	} {
		got, err := ParseFixed([]byte(tc.in))
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("ParseFixed(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestParseFixedMatchesParseFloat: load averages must be the float64
// node_exporter gets from strconv.ParseFloat ("3.28", not 3 + 28/100).
func TestParseFixedMatchesParseFloat(t *testing.T) {
	check := func(s string) {
		got, err := ParseFixed([]byte(s))
		want, werr := strconv.ParseFloat(s, 64)
		if err != nil || werr != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("ParseFixed(%q) = %v, %v; ParseFloat %v", s, got, err, want)
		}
	}
	for i := range 100_000 { // every load average up to 1000.00
		check(fmt.Sprintf("%d.%02d", i/100, i%100))
	}
	for _, s := range []string{"3.28", "1.14", "123456789012345678901234.5", "0.1234567890123456789", "9007199254740993", ".5"} {
		check(s)
	}
}

func FuzzParseFixed(f *testing.F) {
	f.Add([]byte("3.28"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseFixed(b)
		if err != nil {
			return
		}
		want, werr := strconv.ParseFloat(string(b), 64)
		if werr != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("ParseFixed(%q) = %v; ParseFloat %v, %v", b, got, want, werr)
		}
	})
}

func TestFieldsAndLines(t *testing.T) {
	var f [4][]byte
	n := Fields([]byte("  a\tbb  ccc "), f[:])
	if n != 3 || string(f[0]) != "a" || string(f[1]) != "bb" || string(f[2]) != "ccc" {
		t.Errorf("Fields = %d %q", n, f[:n])
	}
	l, rest := NextLine([]byte("x\ny"))
	if string(l) != "x" || string(rest) != "y" {
		t.Errorf("NextLine = %q %q", l, rest)
	}
}

func FuzzParseUint(f *testing.F) {
	f.Add([]byte("123"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseUint(b)
		want, werr := strconv.ParseUint(string(b), 10, 64)
		if len(b) > 0 && b[0] == '+' {
			return // strconv accepts a sign we reject
		}
		if (err == nil) != (werr == nil) || (err == nil && got != want) {
			t.Fatalf("ParseUint(%q) = %v, %v; strconv: %v, %v", b, got, err, want, werr)
		}
	})
}

func TestParseHex(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want uint64
		ok   bool
	}{
		{"0", 8, 0, true}, {"00001a2B", 8, 0x1a2b, true}, {"ffffffff", 8, 0xffffffff, true},
		{"100000000", 8, 0, false}, {"ffffffffffffffff", 16, 1<<64 - 1, true},
		{"", 8, 0, false}, {"0x1", 8, 0, false}, {"g", 8, 0, false}, {"-1", 8, 0, false},
	} {
		got, ok := ParseHex([]byte(tc.in), tc.max)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseHex(%q, %d) = %d, %v; want %d, %v", tc.in, tc.max, got, ok, tc.want, tc.ok)
		}
	}
}
