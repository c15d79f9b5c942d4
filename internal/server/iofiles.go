package server

import (
	"context"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/iorecords"
	"github.com/vigil-hpc/vigil/internal/jobs/report"
)

// jobFiles reads a job's top files from the per-file record store for
// the job report (report.APIQuerier.Files).
func (s *Server) jobFiles(ctx context.Context, id string, start, end time.Time, by string, limit int) ([]report.IOFile, error) {
	b, err := iorecords.ParseBy(by)
	if err != nil {
		return nil, err
	}
	res, err := s.iorec.Top(ctx, iorecords.Query{Start: start, End: end, Job: id, HasJob: true, By: b, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]report.IOFile, 0, len(res.Files))
	for i := range res.Files {
		f := &res.Files[i]
		c := iorecords.Counters(&f.Totals)
		out = append(out, report.IOFile{Path: f.Path, Node: f.Node, Mountpoint: f.MountPoint, ReadBytes: c.BytesRead,
			WriteBytes: c.BytesWritten, Reads: c.Reads, Writes: c.Writes, MetaOps: c.MetaOps, Seconds: c.Seconds,
			SmallWrites: f.Counters[appio.WriteHist] + f.Counters[appio.WriteHist+1]})
	}
	return out, nil
}
