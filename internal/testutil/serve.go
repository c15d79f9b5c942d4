package testutil

import (
	"context"
	"net"
	"testing"
)

// Serve runs serve on a new loopback listener until the test ends, then
// checks that it returned nil, and returns the listener's address.
func Serve(t testing.TB, serve func(ctx context.Context, ln net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}
