package sysattr

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseIntLikeStrconv(t *testing.T) {
	for _, s := range []string{"0", "42", "-7", "+9", "0x1F", "0X1f", "017", "0o17", "0b101", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "-9223372036854775809", "", "-", "0x", "08", "1a", "0xg", " 1"} {
		want, err := strconv.ParseInt(s, 0, 64)
		got, ok := ParseInt([]byte(s))
		if ok != (err == nil) || ok && got != want {
			t.Errorf("ParseInt(%q) = %d, %v; strconv: %d, %v", s, got, ok, want, err)
		}
	}
}

func TestParseUintLikeStrconv(t *testing.T) {
	for _, s := range []string{"0", "18446744073709551615", "18446744073709551616", "0xffffffffffffffff",
		"0x10000000000000000", "-1", "+1", "0x", "07", "09", ""} {
		want, err := strconv.ParseUint(s, 0, 64)
		got, ok := ParseUint([]byte(s))
		if ok != (err == nil) || ok && got != want {
			t.Errorf("ParseUint(%q) = %d, %v; strconv: %d, %v", s, got, ok, want, err)
		}
	}
}

func FuzzParseInt(f *testing.F) {
	f.Add("0x10")
	f.Fuzz(func(t *testing.T, s string) {
		want, err := strconv.ParseInt(s, 0, 64)
		got, ok := ParseInt([]byte(s))
		if ok && (err != nil || got != want) {
			t.Fatalf("ParseInt(%q) = %d; strconv: %d, %v", s, got, want, err)
		}
	})
}

// Rescan lists on the first tick and every RescanEvery after, and while
// the directory is missing answers "not exist" without listing.
func TestRescan(t *testing.T) {
	var r Rescan
	lists, missing := 0, true
	list := func() error {
		lists++
		if missing {
			return fmt.Errorf("open /sys/fs/x: %w", os.ErrNotExist)
		}
		return nil
	}
	for range RescanEvery {
		if err := r.Tick(list); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("tick %d: err %v, want not exist", r.Ticks(), err)
		}
	}
	if lists != 1 {
		t.Fatalf("%d listings in the first %d ticks, want 1", lists, RescanEvery)
	}
	missing = false // the module is loaded
	if err := r.Tick(list); err != nil || lists != 2 {
		t.Fatalf("tick %d: err %v, %d listings; want a listing and no error", r.Ticks(), err, lists)
	}
	if err := r.Tick(list); err != nil || lists != 2 {
		t.Fatalf("the tick after a listing: err %v, %d listings", err, lists)
	}
}

func TestInfo(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "model"), []byte("Disk X\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "port"), []byte("0x5001\n"), 0o644)
	in := OpenInfo(dir, "dev0", []string{"model", "absent", "port"})
	in.Trim = func(i int, v []byte) []byte {
		if i == 2 {
			return v[2:]
		}
		return v
	}
	vals, err := in.Read()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vals {
		got = append(got, string(v))
	}
	if strings.Join(got, "|") != "dev0|Disk X||5001" {
		t.Fatalf("info values %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { in.Read() }); n != 0 {
		t.Fatalf("%v allocations per read, want 0", n)
	}
}
