//go:build !linux

package jobs

import (
	"errors"

	"github.com/vigil-hpc/vigil/internal/sampler"
)

type cgFile struct {
	path    []byte
	fd      int32
	missing bool
}

func newFile(path []byte) cgFile {
	return cgFile{path: append(append([]byte(nil), path...), 0), fd: -1}
}
func (f *cgFile) ok() bool     { return f.path != nil }
func (f *cgFile) name() string { return string(f.path[:len(f.path)-1]) }

type fds struct{ left int }

func (b *fds) close(*cgFile)                         {}
func (b *fds) read(*cgFile, *[]byte) ([]byte, error) { return nil, sampler.ErrNotAvailable }

func listDirs([]byte, *[]byte, *[][]byte) error { return sampler.ErrNotAvailable }

type dirFD struct{ pathZ []byte }

func newDirFD(pathZ []byte) *dirFD             { return &dirFD{pathZ: pathZ} }
func (d *dirFD) list(*[]byte, *[][]byte) error { return sampler.ErrNotAvailable }
func (d *dirFD) close()                        {}
func gone(err error) bool                      { return errors.Is(err, sampler.ErrNotAvailable) }
func denied(error) bool                        { return false }
func exists([]byte) bool                       { return false }
func fdBudget(want int) int                    { return want }

func pread(int, *[]byte) ([]byte, error) { return nil, sampler.ErrNotAvailable }
