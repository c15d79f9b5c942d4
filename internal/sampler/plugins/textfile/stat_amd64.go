//go:build linux && amd64

package textfile

import "syscall"

const sysFstatat = syscall.SYS_NEWFSTATAT
