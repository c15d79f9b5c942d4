package kernfs

import (
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
