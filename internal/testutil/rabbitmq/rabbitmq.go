// Package rabbitmq starts a private RabbitMQ broker for tests: Debian's
// rabbitmq-server run directly (not the /usr/sbin wrapper, which switches
// to the rabbitmq user) with its own node name, ports, epmd, cookie, data
// and logs in a temporary directory, on loopback, stopped at cleanup.
package rabbitmq

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

const (
	serverBin = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	ctlBin    = "/usr/lib/rabbitmq/bin/rabbitmqctl"
)

// Broker is a running RabbitMQ node.
type Broker struct {
	Node string
	Port int
	Dir  string
	env  []string
	cmd  *exec.Cmd
	t    testing.TB
	epmd int
}

// URL is the AMQP URL of user (guest/guest may connect from loopback).
func (b *Broker) URL(user, pass string) string {
	return fmt.Sprintf("amqp://%s:%s@127.0.0.1:%d/", user, pass, b.Port)
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start starts a broker and waits until it answers (about 6 s).
func Start(t testing.TB) *Broker {
	t.Helper()
	if _, err := os.Stat(serverBin); err != nil {
		testutil.MissingPeer(t, "rabbitmq-server not installed (apt-get install rabbitmq-server)")
	}
	if os.Geteuid() != 0 {
		testutil.MissingPeer(t, "the RabbitMQ harness runs rabbitmq-server directly and needs root")
	}
	dir := t.TempDir()
	b := &Broker{Node: fmt.Sprintf("vt%d_%d@localhost", os.Getpid(), time.Now().UnixNano()%1e9), Port: freePort(t), Dir: dir, t: t, epmd: freePort(t)}
	for _, d := range []string{"mnesia", "log", "home"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	conf := filepath.Join(dir, "rabbitmq.conf")
	// Small disk alarm: test machines have little free space.
	os.WriteFile(conf, []byte("disk_free_limit.absolute = 50MB\nloopback_users.guest = true\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644)
	// A private cookie: the node and rabbitmqctl read it from HOME.
	os.WriteFile(filepath.Join(dir, "home", ".erlang.cookie"), []byte(fmt.Sprintf("VIGILTEST%d", time.Now().UnixNano())), 0o400)
	b.env = append(os.Environ(),
		"HOME="+filepath.Join(dir, "home"),
		"RABBITMQ_NODENAME="+b.Node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(b.Port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(freePort(t)),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE="+conf,
		"ERL_EPMD_PORT="+strconv.Itoa(b.epmd),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"),
	)
	// Our own epmd on the private port, a child we can kill: one the node
	// started itself would be a daemon outliving the test.
	epmd := exec.Command("epmd", "-port", strconv.Itoa(b.epmd), "-relaxed_command_check")
	epmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := epmd.Start(); err != nil {
		testutil.MissingPeer(t, "epmd: %v", err)
	}
	t.Cleanup(func() {
		b.Stop()
		epmd.Process.Kill()
		epmd.Wait()
	})
	for i := 0; i < 50; i++ { // until it listens
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(b.epmd)); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.start()
	return b
}

func (b *Broker) start() {
	t := b.t
	t.Helper()
	cmd := exec.Command(serverBin)
	cmd.Env = b.env
	out, err := os.OpenFile(filepath.Join(b.Dir, "server.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rabbitmq-server: %v", err)
	}
	out.Close()
	b.cmd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// await_startup fails at once while the node is not registered yet.
	var o []byte
	for {
		if o, err = b.ctl(ctx, "await_startup"); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(b.Dir, "server.out"))
		b.Stop()
		t.Fatalf("rabbitmq await_startup: %v\n%s\n%s", err, o, log)
	}
}

func (b *Broker) ctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, ctlBin, append([]string{"-n", b.Node}, args...)...)
	cmd.Env = b.env
	return cmd.CombinedOutput()
}

// Ctl runs rabbitmqctl against the broker, failing t on an error.
func (b *Broker) Ctl(args ...string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := b.ctl(ctx, args...)
	if err != nil {
		b.t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Stop stops the node (rabbitmqctl stop, then SIGKILL of its process
// group if it lingers). Data stays: Restart brings it back.
func (b *Broker) Stop() {
	if b.cmd == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b.ctl(ctx, "stop")
	done := make(chan struct{})
	go func() { b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	// Erlang helpers (erl_child_setup, inet_gethost) share the group.
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	b.cmd = nil
}

// Restart starts the stopped node again on the same ports and data.
func (b *Broker) Restart() {
	b.t.Helper()
	b.start()
}
