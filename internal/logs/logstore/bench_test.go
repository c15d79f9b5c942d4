package logstore

import (
	"testing"
)

func BenchmarkAppend(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := gen(t0, 0, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkSearch(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 100 {
		if err := s.Append(gen(t0, i*1000, 1000)); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct{ name, q string }{
		{"newest100", ""},
		{"host+term", "host:cn01 app:slurmd number"},
		{"no-match/full-scan", "host:cn01 app:sshd"},
		{"rare-term/full-scan", `"number 12345 "`},
	} {
		q, err := ParseQuery(c.q)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Search(q, 0, 100); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen measures start-up, which reads every segment to rebuild the
// sparse index.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		if err := s.Append(gen(t0, i*1000, 1000)); err != nil {
			b.Fatal(err)
		}
	}
	size := s.Stats().Bytes
	s.Close()
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
