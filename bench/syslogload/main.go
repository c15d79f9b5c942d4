// Command syslogload measures sustained syslog intake over TCP: it sends N
// messages on several connections to a running intake (or to one it starts
// in this process), waits until the service reports all of them durable,
// prints the rate, and then pages through a search for the run's marker to
// check that every message is searchable.
//
//	go run ./bench/syslogload -n 1000000 -conns 4
//	go run ./bench/syslogload -addr 127.0.0.1:601 -api http://127.0.0.1:9090/api/v1/logs
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logsvc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "syslogload:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "", "TCP syslog intake; empty starts one in this process on a temporary directory")
	api := flag.String("api", "", "logs HTTP API base, e.g. http://127.0.0.1:9090/api/v1/logs (with -addr)")
	n := flag.Int("n", 1_000_000, "messages to send")
	conns := flag.Int("conns", 4, "TCP connections")
	framing := flag.String("framing", "newline", "newline or octet")
	verify := flag.Bool("verify", true, "search every message afterwards")
	dir := flag.String("dir", "", "data directory of the in-process intake (default: a temporary one, removed)")
	flag.Parse()
	if *framing != "newline" && *framing != "octet" {
		return fmt.Errorf("-framing %q: want newline or octet", *framing)
	}
	local := *addr == ""
	if local {
		stop, tcp, base, err := startLocal(*dir)
		if err != nil {
			return err
		}
		defer stop()
		*addr, *api = tcp, base
	} else if *api == "" {
		return errors.New("-api is needed with -addr")
	}
	base, err := stats(*api)
	if err != nil {
		return err
	}
	run := "run" + strconv.FormatInt(time.Now().UnixNano(), 36)
	fmt.Printf("sending %d messages on %d connections to %s (%s framing), marker %s\n", *n, *conns, *addr, *framing, run)

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, *conns)
	for c := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := send(*addr, run, c, *conns, *n, *framing == "octet"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	sent := time.Since(start)
	close(errs)
	for err := range errs {
		return err
	}
	for {
		st, err := stats(*api)
		if err != nil {
			return err
		}
		if st.Accepted-base.Accepted >= uint64(*n) {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("only %d of %d accepted after 10 minutes", st.Accepted-base.Accepted, *n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(start)
	fmt.Printf("sent in %v, all %d durable after %v: %.0f msgs/s sustained\n",
		sent.Round(time.Millisecond), *n, took.Round(time.Millisecond), float64(*n)/took.Seconds())
	st, _ := stats(*api)
	fmt.Printf("store: %d records, %d bytes in %d segments; %d patterns; udp dropped %d, rejected %d, malformed %d\n",
		st.Store.Records, st.Store.Bytes, st.Store.Segments, st.Patterns, st.UDPDropped, st.Rejected, st.Malformed)
	if local {
		// The sender's buffers are gone; what is left is mostly the service.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("in-process heap after GC: %d MiB in use, %d MiB from the OS\n", ms.HeapInuse>>20, ms.Sys>>20)
	}
	if !*verify {
		return nil
	}
	vstart := time.Now()
	found, err := searchAll(*api, run, *n)
	if err != nil {
		return err
	}
	missing := 0
	for _, ok := range found {
		if !ok {
			missing++
		}
	}
	fmt.Printf("verify: %d of %d messages searchable, %d missing (search took %v)\n",
		*n-missing, *n, missing, time.Since(vstart).Round(time.Millisecond))
	if missing > 0 {
		return fmt.Errorf("%d messages missing", missing)
	}
	return nil
}

func startLocal(dir string) (stop func(), tcp, api string, err error) {
	cleanup := func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "syslogload"); err != nil {
			return nil, "", "", err
		}
		cleanup = func() { os.RemoveAll(dir) }
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := logsvc.New(logsvc.Config{TCPAddr: "127.0.0.1:0", DataDir: dir}, log)
	if err != nil {
		cleanup()
		return nil, "", "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return nil, "", "", err
	}
	hs := &http.Server{Handler: svc.Handler()}
	go hs.Serve(ln)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	_, t, _ := svc.Addrs()
	return func() {
		hs.Close()
		cancel()
		<-done
		cleanup()
	}, t.String(), "http://" + ln.Addr().String() + logsvc.Prefix, nil
}

// shapes are a few message kinds, so the miner sees several patterns.
var shapes = []string{
	"sshd[%d]: Accepted publickey for user%d from 10.1.%d.%d port %d ssh2 %s seq=%d",
	"slurmd[%d]: launch task StepId=%d.0 request from UID:%d GID:%d PORT:%d %s seq=%d",
	"kernel[%d]: EDAC MC%d: %d CE memory read error on CPU_SrcID#%d_Ha#0 (channel:%d) %s seq=%d",
	"lustre[%d]: LustreError: 11-0: scratch-OST%04d-osc: operation ost_write to node 10.3.%d.%d@o2ib failed: rc = -%d %s seq=%d",
}

func send(addr, run string, c, conns, n int, octet bool) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	w := bufio.NewWriterSize(conn, 256<<10)
	var msg, frame []byte
	stamp := time.Now().Format(time.Stamp)
	for i := c; i < n; i += conns {
		msg = fmt.Appendf(msg[:0], "<%d>%s cn%04d ", 8+i%8, stamp, i%512)
		msg = fmt.Appendf(msg, shapes[i%len(shapes)], i%30000, i%977, i%251, i%13, i%65000, run, i)
		frame = frame[:0]
		if octet {
			frame = strconv.AppendInt(frame, int64(len(msg)), 10)
			frame = append(frame, ' ')
			frame = append(frame, msg...)
		} else {
			frame = append(append(frame, msg...), '\n')
		}
		if _, err := w.Write(frame); err != nil {
			return fmt.Errorf("send on connection %d: %w", c, err)
		}
	}
	return w.Flush()
}

type statsResp struct {
	Accepted   uint64 `json:"accepted"`
	UDPDropped uint64 `json:"udp_dropped"`
	Rejected   uint64 `json:"rejected_frames"`
	Malformed  uint64 `json:"malformed"`
	Patterns   int    `json:"patterns"`
	Store      struct {
		Records  uint64 `json:"records"`
		Bytes    int64  `json:"bytes"`
		Segments int    `json:"segments"`
	} `json:"store"`
}

func stats(api string) (statsResp, error) {
	var st statsResp
	resp, err := http.Get(api + "/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("GET %s/stats: %s", api, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// searchAll pages through the search for the run marker and marks the seq=
// number of each record found.
func searchAll(api, run string, n int) ([]bool, error) {
	found := make([]bool, n)
	cursor := ""
	for {
		v := url.Values{"q": {run}, "limit": {"10000"}}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		resp, err := http.Get(api + "/search?" + v.Encode())
		if err != nil {
			return nil, err
		}
		var r logsvc.SearchResponse
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		for _, rec := range r.Records {
			_, s, ok := strings.Cut(rec.Text, " seq=")
			i, err := strconv.Atoi(s)
			if !ok || err != nil || i < 0 || i >= n {
				return nil, fmt.Errorf("unexpected record %q", rec.Text)
			}
			found[i] = true
		}
		if r.NextCursor == "" {
			return found, nil
		}
		cursor = r.NextCursor
	}
}
