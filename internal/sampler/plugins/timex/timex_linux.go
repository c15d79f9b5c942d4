//go:build linux

package timex

import (
	"syscall"
	"unsafe"
)

type rawTimex = syscall.Timex

// adjtimex queries the clock (modes 0: nothing is set, no privilege
// needed). It never blocks, so it is a raw call the scheduler does not see.
func adjtimex(tx *rawTimex, s *State) error {
	*tx = rawTimex{}
	r, _, e := syscall.RawSyscall(syscall.SYS_ADJTIMEX, uintptr(unsafe.Pointer(tx)), 0, 0)
	if e != 0 {
		return e
	}
	*s = State{
		Return: int(r), Offset: int64(tx.Offset), Freq: int64(tx.Freq),
		Maxerror: int64(tx.Maxerror), Esterror: int64(tx.Esterror), Status: int64(tx.Status),
		Constant: int64(tx.Constant), Tick: int64(tx.Tick), Ppsfreq: int64(tx.Ppsfreq),
		Jitter: int64(tx.Jitter), Shift: int64(tx.Shift), Stabil: int64(tx.Stabil),
		Jitcnt: int64(tx.Jitcnt), Calcnt: int64(tx.Calcnt), Errcnt: int64(tx.Errcnt),
		Stbcnt: int64(tx.Stbcnt), Tai: int64(tx.Tai),
	}
	return nil
}
