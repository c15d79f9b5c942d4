//go:build !linux

package appio

import "context"

func watchMounts(context.Context, string, func()) bool { return false }
