package iorecords

import (
	"fmt"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Tap returns h taking the IORecords frames the tree sends into s as
// well (wire.IORecordHandler). A Keeper (the server's ingest) stays one.
func (s *Store) Tap(h wire.Handler) wire.Handler {
	if k, ok := h.(keeperHandler); ok {
		return tappedKeeper{k, s}
	}
	return tapped{h, s}
}

type keeperHandler interface {
	wire.Handler
	wire.Keeper
}

type tapped struct {
	wire.Handler
	s *Store
}

type tappedKeeper struct {
	keeperHandler
	s *Store
}

func (t tapped) IORecords(_ string, recs []appio.FileRecord, _ []byte) error {
	return t.s.take(recs)
}

func (t tappedKeeper) IORecords(_ string, recs []appio.FileRecord, _ []byte) error {
	return t.s.take(recs)
}

// take stores records from the wire; an error ends the connection before
// the frame is acknowledged, so the sender sends it again.
func (s *Store) take(recs []appio.FileRecord) error {
	if err := s.Append(recs); err != nil {
		return fmt.Errorf("%w: %w", wire.ErrNotKept, err)
	}
	return nil
}
