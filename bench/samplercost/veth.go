package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// On loopback the sampler's write(2) also runs the receiver's TCP receive
// (tcp_v4_rcv and the wake-up of the reader) in the sampler's own system
// call: about 7 % of the sampler's CPU at 10 Hz (docs/benchmarks.md, "Idle
// wake-ups"). On a cluster that work runs on the aggregator's host. With --veth the receiver runs in a network
// namespace of its own behind a veth pair whose both ends hand received
// packets to threaded NAPI (GRO on, /sys/class/net/DEV/threaded = 1), so
// the receiving work, the sampler's incoming TCP ACKs included, runs in
// the napi/DEV kernel threads as it would behind a NIC; the sampler pays
// its TCP send and the veth's transmit.

// vethNet is the namespace and veth pair made for one samplercost run.
type vethNet struct {
	ns, near, far string // namespace; the veth ends in ours and in ns
	nearIP, farIP string
}

func newVethNet() (*vethNet, error) {
	pid := os.Getpid()
	sub := pid%250 + 1
	v := &vethNet{ns: fmt.Sprintf("vcost%d", pid), near: fmt.Sprintf("vc%da", pid), far: fmt.Sprintf("vc%db", pid),
		nearIP: fmt.Sprintf("10.231.%d.1", sub), farIP: fmt.Sprintf("10.231.%d.2", sub)}
	steps := [][]string{
		{"ip", "netns", "add", v.ns},
		{"ip", "link", "add", v.near, "type", "veth", "peer", "name", v.far, "netns", v.ns},
		{"ip", "addr", "add", v.nearIP + "/30", "dev", v.near},
		{"ip", "link", "set", v.near, "up"},
		{"ip", "-n", v.ns, "addr", "add", v.farIP + "/30", "dev", v.far},
		{"ip", "-n", v.ns, "link", "set", v.far, "up"},
		{"ethtool", "-K", v.near, "gro", "on"},
		{"ip", "netns", "exec", v.ns, "ethtool", "-K", v.far, "gro", "on"},
		{"sh", "-c", "echo 1 > /sys/class/net/" + v.near + "/threaded"},
		{"ip", "netns", "exec", v.ns, "sh", "-c", "echo 1 > /sys/class/net/" + v.far + "/threaded"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			v.close()
			return nil, fmt.Errorf("--veth needs root, ip and ethtool: %s: %w\n%s", strings.Join(s, " "), err, out)
		}
	}
	return v, nil
}

// close removes the namespace, and with it the veth pair.
func (v *vethNet) close() {
	_ = exec.Command("ip", "netns", "del", v.ns).Run()
}

// startReceiver runs this program's receive mode inside the namespace and
// returns the address it listens on.
func (v *vethNet) startReceiver(ctx context.Context, ack time.Duration, keyFile string, received *atomic.Int64) (string, *exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", v.ns, self, "receive", net.JoinHostPort(v.farIP, "0"), ack.String(), keyFile)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("receiver in %s: no address (%v)", v.ns, sc.Err())
	}
	addr := strings.TrimSpace(sc.Text())
	go func() { // then "ticks N" lines: the count so far
		for sc.Scan() {
			if n, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "ticks "), 10, 64); err == nil {
				received.Store(n)
			}
		}
	}()
	return addr, cmd, nil
}

// receive is the receiver's mode (`samplercost receive ADDR ACKINTERVAL
// KEYFILE`): it acknowledges and discards ticks until killed, printing its
// address, then every 200 ms "ticks N", the ticks received so far.
func receive(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: samplercost receive ADDR ACKINTERVAL KEYFILE")
	}
	ack, err := time.ParseDuration(args[1])
	if err != nil {
		return err
	}
	key, err := wire.LoadKey(args[2])
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	var n atomic.Int64
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			fmt.Printf("ticks %d\n", n.Load())
		}
	}()
	return wire.Serve(context.Background(), ln, wire.ServerOptions{Log: slog.New(slog.DiscardHandler), AckInterval: ack, Key: key}, &countingSink{n: &n})
}
