//go:build !unix

package pattern_test

func cpuSeconds() float64 { return 0 }
