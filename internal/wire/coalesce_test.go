package wire

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// woken reports, and clears, the client's wake-up of its writer.
func woken(c *Client) bool {
	select {
	case <-c.wake:
		return true
	default:
		return false
	}
}

// TestCoalesceWaitsForFastStreams: with Coalesce, a tick of a stream
// ticking at most that far apart waits for the stream's next tick, and the
// two wake the writer once; a slower stream's tick, the first tick of a
// stream and a client without Coalesce wake it every time, and a tick
// written at once takes a waiting one along.
func TestCoalesceWaitsForFastStreams(t *testing.T) {
	d := metric.NewDesc("x", "x", metric.Gauge)
	tick := func(c *Client, cs *ClientStream) bool {
		c.Tick(cs, time.Now(), []*metric.Desc{d}, []float64{1})
		return woken(c)
	}
	frames := func(c *Client) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sq.waiting()
	}
	synctest.Test(t, func(t *testing.T) {
		c, err := NewClient(ClientOptions{Addrs: []string{"127.0.0.1:1"}, Coalesce: 250 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		fast, slow := c.NewStream("cn1"), c.NewStream("cn1")
		if !tick(c, fast) {
			t.Fatal("a stream's first tick waits")
		}
		c.collect(nil, 1<<20)
		// 10 Hz: every other tick waits for the next.
		var got []bool
		for range 6 {
			time.Sleep(100 * time.Millisecond)
			got = append(got, tick(c, fast))
			if got[len(got)-1] {
				if n := frames(c); n != 2 {
					t.Fatalf("written together: %d frames, want 2", n)
				}
				c.collect(nil, 1<<20)
			}
		}
		if want := []bool{false, true, false, true, false, true}; !slices.Equal(got, want) {
			t.Fatalf("writer woken %v, want %v", got, want)
		}
		// A stream ticking every second is written at once, and takes a
		// held tick of the fast one along.
		tick(c, slow)
		c.collect(nil, 1<<20)
		time.Sleep(100 * time.Millisecond)
		if tick(c, fast) {
			t.Fatal("fast tick not held")
		}
		time.Sleep(900 * time.Millisecond)
		if !tick(c, slow) || frames(c) != 2 {
			t.Fatalf("slow tick: %d frames queued, want the held one and its own, written at once", frames(c))
		}

		u, err := NewClient(ClientOptions{Addrs: []string{"127.0.0.1:1"}})
		if err != nil {
			t.Fatal(err)
		}
		us := u.NewStream("cn1")
		for range 3 {
			if !tick(u, us) {
				t.Fatal("without Coalesce a tick waited")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
