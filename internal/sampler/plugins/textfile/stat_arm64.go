//go:build linux && arm64

package textfile

import "syscall"

const sysFstatat = syscall.SYS_FSTATAT
