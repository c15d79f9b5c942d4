package server

import (
	"context"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/iorecords"
	"github.com/vigil-hpc/vigil/internal/jobs/report"
)

// jobFiles reads a job's top files from the per-file record store for
// the job report (report.APIQuerier.Files): one pass over the job's
// records, ranked three ways.
func (s *Server) jobFiles(ctx context.Context, id string, start, end time.Time, limit int) (*report.IOFiles, error) {
	tops, err := s.iorec.JobFiles(ctx, id, start, end, limit)
	if err != nil {
		return nil, err
	}
	conv := func(fs []iorecords.File) []report.IOFile {
		out := make([]report.IOFile, 0, len(fs))
		for i := range fs {
			f := &fs[i]
			c := iorecords.Counters(&f.Totals)
			out = append(out, report.IOFile{Path: f.Path, Node: f.Node, Mountpoint: f.MountPoint, ReadBytes: c.BytesRead,
				WriteBytes: c.BytesWritten, Reads: c.Reads, Writes: c.Writes, MetaOps: c.MetaOps, Seconds: c.Seconds,
				SmallWrites: f.Counters[appio.WriteHist] + f.Counters[appio.WriteHist+1]})
		}
		return out
	}
	return &report.IOFiles{ByBytes: conv(tops[iorecords.ByBytes]), ByCalls: conv(tops[iorecords.ByCalls]),
		ByTime: conv(tops[iorecords.ByTime])}, nil
}
