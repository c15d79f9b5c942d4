package appio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func rec(file, pid uint32, seed uint64) Record {
	r := Record{FileID: file, PID: pid}
	for i := range r.C {
		r.C[i] = seed*100 + uint64(i)
	}
	return r
}

func TestRoundTrip(t *testing.T) {
	hello := Hello{Rank: 3, IntervalMS: 1000, Exe: "/usr/bin/dd", JobID: "42", Client: "libvigilio 0.1"}
	file := File{ID: 7, Flags: FlagIOFS, PID: 1234, Path: "/scratch/u/out.dat"}
	recs := []Record{rec(7, 0, 1), rec(0, 99, 2)}
	for _, tc := range []struct {
		name string
		msg  []byte
		want Message
	}{
		{"hello", AppendHello(nil, hello), Message{Type: TypeHello, Hello: hello}},
		{"hello unknown rank", AppendHello(nil, Hello{Rank: -1}), Message{Type: TypeHello, Hello: Hello{Rank: -1}}},
		{"file", AppendFile(nil, file), Message{Type: TypeFile, File: file}},
		{"interval", AppendInterval(nil, 1e18, 1e18+1e9, recs), Message{Type: TypeInterval, Interval: Interval{Start: 1e18, End: 1e18 + 1e9, Records: recs}}},
		{"bye", AppendBye(nil), Message{Type: TypeBye}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestWireLayout pins the byte layout of the contract: a FILE message
// written out by hand.
func TestWireLayout(t *testing.T) {
	want := []byte("VIO1\x01\x00\x02\x00\x10\x00\x00\x00" + // header: version 1, type 2, 16 bytes
		"\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + // id 5, flags 0, pid 0
		"\x02\x00/a")
	if got := AppendFile(nil, File{ID: 5, Path: "/a"}); !bytes.Equal(got, want) {
		t.Errorf("FILE = %q, want %q", got, want)
	}
	iv := AppendInterval(nil, 1, 2, []Record{{FileID: 1, C: [NCounters]uint64{BytesWritten: 0x0102}}})
	if len(iv) != HeaderSize+20+RecordSize {
		t.Fatalf("INTERVAL of one record is %d bytes", len(iv))
	}
	if v := binary.LittleEndian.Uint64(iv[HeaderSize+20+8+8*BytesWritten:]); v != 0x0102 {
		t.Errorf("bytes_written at its offset = %#x", v)
	}
}

func TestHeaderErrors(t *testing.T) {
	good := AppendBye(nil)
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, msg := range map[string][]byte{
		"empty":      nil,
		"short":      good[:11],
		"magic":      mut(func(b []byte) []byte { b[0] = 'X'; return b }),
		"version":    mut(func(b []byte) []byte { b[4] = 2; return b }),
		"length big": mut(func(b []byte) []byte { b[8] = 1; return b }),
		"trailing":   append(bytes.Clone(good), 0),
		"oversize":   append(AppendHello(nil, Hello{}), make([]byte, MaxMessage)...),
	} {
		if _, _, err := ParseHeader(msg); !errors.Is(err, ErrHeader) {
			t.Errorf("%s: err = %v, want ErrHeader", name, err)
		}
	}
	// An unknown type is skipped, not an error.
	unk := mut(func(b []byte) []byte { b[6] = 99; return b })
	if m, err := Decode(unk); err != nil || m.Type != 99 {
		t.Errorf("unknown type: %+v, %v", m, err)
	}
}

func TestMessageErrors(t *testing.T) {
	long := strings.Repeat("x", MaxString+1)
	hdr := func(t Type, payload []byte) []byte {
		b := appendHeader(nil, t)
		return finish(append(b, payload...), 0)
	}
	helloOver := binary.LittleEndian.AppendUint32(nil, 0)
	helloOver = binary.LittleEndian.AppendUint32(helloOver, 1000)
	helloOver = binary.LittleEndian.AppendUint16(helloOver, uint16(len(long)))
	helloOver = append(helloOver, long...)
	helloOver = append(helloOver, 0, 0, 0, 0)
	ivBad := AppendInterval(nil, 5, 6, []Record{rec(1, 0, 1)})
	for name, msg := range map[string][]byte{
		"hello short":        hdr(TypeHello, []byte{1, 2, 3}),
		"hello string > max": hdr(TypeHello, helloOver),
		"hello rank -2":      AppendHello(nil, Hello{Rank: -2}),
		"file id 0":          AppendFile(nil, File{ID: 0, Path: "/a"}),
		"file relative":      AppendFile(nil, File{ID: 1, Path: "a/b"}),
		"file empty":         AppendFile(nil, File{ID: 1}),
		"file nul":           AppendFile(nil, File{ID: 1, Path: "/a\x00b"}),
		"file cut string":    AppendFile(nil, File{ID: 1, Path: "/abc"})[:HeaderSize+14],
		"interval short":     hdr(TypeInterval, make([]byte, 19)),
		"interval count":     mutate(ivBad, HeaderSize+16, 2),
		"interval backwards": AppendInterval(nil, 6, 5, nil),
		"interval huge n":    mutate(AppendInterval(nil, 1, 2, nil), HeaderSize+19, 0xff),
		"counter over 2^53":  AppendInterval(nil, 1, 2, []Record{{FileID: 1, C: [NCounters]uint64{Reads: MaxCounter + 1}}}),
		"bye payload":        hdr(TypeBye, []byte{0}),
	} {
		if len(msg) == 0 {
			continue
		}
		if _, err := Decode(msg); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	// The header's length is patched for the cut FILE, so it is a message
	// error, not a header one: check one explicitly.
	cut := AppendFile(nil, File{ID: 1, Path: "/abc"})
	cut = finish(cut[:len(cut)-1], 0)
	if _, err := Decode(cut); !errors.Is(err, ErrMessage) {
		t.Errorf("cut path: %v, want ErrMessage", err)
	}
	trailing := AppendHello(nil, Hello{})
	trailing = finish(append(trailing, 0), 0)
	if _, err := Decode(trailing); !errors.Is(err, ErrMessage) {
		t.Errorf("trailing byte: %v, want ErrMessage", err)
	}
}

func mutate(b []byte, at int, v byte) []byte {
	b = bytes.Clone(b)
	b[at] = v
	return b
}

// Strings longer than the bound are cut by the encoder, so what it
// writes always decodes; exactly MaxString is allowed.
func TestStringBound(t *testing.T) {
	path := "/" + strings.Repeat("p", MaxString-1)
	m, err := Decode(AppendFile(nil, File{ID: 1, Path: path + "tail"}))
	if err != nil || m.File.Path != path {
		t.Fatalf("path of %d bytes: %v, got %d bytes", MaxString, err, len(m.File.Path))
	}
}

func TestSplitInterval(t *testing.T) {
	var recs []Record
	for i := 0; i < 2*MaxRecords+5; i++ {
		recs = append(recs, rec(uint32(i+1), 0, uint64(i)))
	}
	recs = append(recs, Record{FileID: 9999}) // all zero: left out
	msgs := SplitInterval(10, 20, recs)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	var got []Record
	for _, m := range msgs {
		if len(m) > MaxMessage {
			t.Errorf("message of %d bytes", len(m))
		}
		d, err := Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		if d.Interval.Start != 10 || d.Interval.End != 20 {
			t.Errorf("interval %d..%d", d.Interval.Start, d.Interval.End)
		}
		got = append(got, d.Interval.Records...)
	}
	if !reflect.DeepEqual(got, recs[:len(recs)-1]) {
		t.Errorf("records differ after the split")
	}
	if len(SplitInterval(1, 2, []Record{{FileID: 1}})) != 0 {
		t.Errorf("an interval of zero records was sent")
	}
	if MaxRecords*RecordSize+HeaderSize+20 > MaxMessage || (MaxRecords+1)*RecordSize+HeaderSize+20 <= MaxMessage {
		t.Errorf("MaxRecords %d is not the most that fit", MaxRecords)
	}
}

func TestDecodeIntervalReuses(t *testing.T) {
	msg := AppendInterval(nil, 1, 2, []Record{rec(1, 0, 1), rec(2, 0, 2)})
	_, p, err := ParseHeader(msg)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]Record, 0, 4)
	allocs := testing.AllocsPerRun(20, func() {
		iv, err := DecodeInterval(p, buf)
		if err != nil || len(iv.Records) != 2 {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("DecodeInterval allocates %v times", allocs)
	}
}

func TestBucketLabels(t *testing.T) {
	want := []string{"100", "1024", "10240", "102400", "1048576", "4194304", "10485760", "104857600", "1073741824", "+Inf"}
	if !reflect.DeepEqual(BucketLabels[:], want) {
		t.Errorf("labels %v", BucketLabels)
	}
	if CounterNames[ReadHist] != "read_size_0_100" || CounterNames[WriteHist+NBuckets-1] != "write_size_1G_plus" || CounterNames[RandomAccesses] != "random_accesses" {
		t.Errorf("counter names out of order")
	}
}

// FuzzDecode: no input crashes the decoder or makes it read out of
// bounds; whatever decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(AppendHello(nil, Hello{Rank: 1, IntervalMS: 1000, Exe: "/bin/x", Client: "c"}))
	f.Add(AppendFile(nil, File{ID: 1, Path: "/x"}))
	f.Add(AppendInterval(nil, 1, 2, []Record{rec(1, 0, 1)}))
	f.Add(AppendBye(nil))
	f.Add([]byte("VIO1\x01\x00\x03\x00\x14\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := Decode(msg)
		if err != nil {
			return
		}
		var again []byte
		switch m.Type {
		case TypeHello:
			again = AppendHello(nil, m.Hello)
		case TypeFile:
			again = AppendFile(nil, m.File)
		case TypeInterval:
			again = AppendInterval(nil, m.Interval.Start, m.Interval.End, m.Interval.Records)
		case TypeBye:
			again = AppendBye(nil)
		default:
			return
		}
		if !bytes.Equal(again, msg) {
			t.Errorf("re-encoded %q as %q", msg, again)
		}
	})
}

func TestSmallAccesses(t *testing.T) {
	for _, tc := range []struct {
		max  uint64
		want int
	}{{0, 0}, {99, 0}, {100, 1}, {1023, 1}, {1024, 2}, {4 << 10, 2}, {10 << 10, 3}, {1 << 30, 9}, {1 << 40, 9}} {
		if got := SmallBuckets(tc.max); got != tc.want {
			t.Errorf("SmallBuckets(%d) = %d, want %d", tc.max, got, tc.want)
		}
	}
	h := [NBuckets]uint64{5, 7, 11, 13, 0, 0, 0, 0, 0, 17}
	if got := SmallAccesses(&h, 1024); got != 12 {
		t.Errorf("SmallAccesses(≤ 1 KiB) = %d, want 12", got)
	}
	if got := SmallAccesses(&h, 1<<40); got != 5+7+11+13 {
		t.Errorf("SmallAccesses(all bounded) = %d, want 36 (the last bucket has no bound)", got)
	}
}
