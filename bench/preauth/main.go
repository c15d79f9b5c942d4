// Command preauth checks what unauthenticated connections cost a wire
// listener: it opens --n connections to --addr at once, each announcing a
// 16 MiB Hello and writing up to 16 MiB of it, and reports how many the far
// end closed (not timed out). Watch the listener's RSS meanwhile.
//
//	go run ./bench/preauth --addr 127.0.0.1:7070 --n 150
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7070", "wire listener to flood (loopback only)")
	n := flag.Int("n", 150, "connections, all at once")
	flag.Parse()
	hdr := []byte{0x00, 0xff, 0xff, 0xff, wire.Version, 1} // length 16 MiB - 1, Hello
	body := make([]byte, 64<<10)
	var wg sync.WaitGroup
	var closed, sent atomic.Int64
	for range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", *addr)
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(15 * time.Second))
			if _, err := c.Write(hdr); err != nil {
				closed.Add(1)
				return
			}
			for range 256 {
				k, err := c.Write(body)
				sent.Add(int64(k))
				if err != nil {
					break
				}
			}
			_, err = io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("connections %d, closed by the server %d, bytes written %d MiB\n", *n, closed.Load(), sent.Load()>>20)
}
