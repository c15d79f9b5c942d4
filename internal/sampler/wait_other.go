//go:build !linux

package sampler

import "context"

// newWaiter returns a Go timer: the kernel timer is Linux only.
func newWaiter(context.Context) waiter { return newGoTimer() }
