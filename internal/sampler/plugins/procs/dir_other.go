//go:build !linux

package procs

import (
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/sampler"
)

// Outside Linux there is no /proc/<pid> to read.
type procDir struct {
	path string
	fd   int
}

func (d *procDir) close() {}

func (d *procDir) listPIDs(pids []int32) ([]int32, error) {
	return pids, fmt.Errorf("procs: %w", sampler.ErrNotAvailable)
}

func openat(int, []byte) (int, error)                   { return -1, errors.ErrUnsupported }
func pread(int, []byte) (data, grown []byte, err error) { return nil, nil, errors.ErrUnsupported }
func preadMaySleep(int, []byte) (data, grown []byte, err error) {
	return nil, nil, errors.ErrUnsupported
}
func vanished(error) bool   { return false }
func denied(error) bool     { return false }
func closeFD(int)           {}
func fdBudget(want int) int { return want }
