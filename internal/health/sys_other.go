//go:build !linux

package health

import (
	"context"
	"errors"
	"os"
	"time"
)

func statfs(string) (total, avail uint64, err error) {
	return 0, 0, errors.New("statfs needs Linux")
}

func execCheck(argv []string, _ bool, _ time.Duration) func(context.Context, *env) outcome {
	return func(context.Context, *env) outcome { return fail("running %s needs Linux", argv[0]) }
}

func readComm(path string, buf []byte) ([]byte, bool) {
	b, err := os.ReadFile(path)
	return b, err == nil
}
