package drain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Slurm drains and resumes nodes with scontrol.
type Slurm struct {
	Scontrol string        // path of scontrol (default: from PATH)
	Timeout  time.Duration // per command (0: 10s)
	Env      []string      // the commands' environment (nil: the server's)
}

// maxOutput bounds what scontrol may answer about one node.
const maxOutput = 1 << 20

// Node implements Scheduler with `scontrol -o show node NAME`.
func (s *Slurm) Node(ctx context.Context, name string) (NodeInfo, error) {
	out, err := s.run(ctx, "-o", "show", "node", name)
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && strings.Contains(err.Error(), "not found") { // "Node x not found", not a missing scontrol
			return NodeInfo{}, fmt.Errorf("%s: %w", name, ErrNoNode)
		}
		return NodeInfo{}, err
	}
	return parseNode(out, name)
}

// Drain implements Scheduler.
func (s *Slurm) Drain(ctx context.Context, name, reason string) error {
	_, err := s.run(ctx, "update", "NodeName="+name, "State=DRAIN", "Reason="+reason)
	return err
}

// Resume implements Scheduler.
func (s *Slurm) Resume(ctx context.Context, name string) error {
	_, err := s.run(ctx, "update", "NodeName="+name, "State=RESUME")
	return err
}

// capped keeps at most maxOutput bytes and remembers it had more. The
// buffer is a field, not embedded: an embedded bytes.Buffer's ReadFrom
// would let io.Copy (exec's pipe copier) write past the cap.
type capped struct {
	buf  bytes.Buffer
	over bool
}

func (b *capped) Write(p []byte) (int, error) {
	if room := maxOutput - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (s *Slurm) run(ctx context.Context, args ...string) ([]byte, error) {
	name, timeout := s.Scontrol, s.Timeout
	if name == "" {
		name = "scontrol"
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.Env
	cmd.WaitDelay = time.Second
	var out, errOut capped
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("scontrol %s: no answer within %v", args[0], timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(errOut.buf.String() + " " + out.buf.String())
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return nil, fmt.Errorf("scontrol %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	if out.over {
		return nil, fmt.Errorf("scontrol %s: answer longer than %d bytes", args[0], maxOutput)
	}
	return out.buf.Bytes(), nil
}

// parseNode reads `scontrol -o show node NAME`: one line of Key=value
// fields, Reason last, its text followed by " [user@time]".
func parseNode(b []byte, name string) (NodeInfo, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	s := string(bytes.TrimSpace(line))
	if !strings.HasPrefix(s, "NodeName="+name+" ") {
		return NodeInfo{}, fmt.Errorf("scontrol show node %s: answer does not start with NodeName=%s: %.80q", name, name, s)
	}
	var info NodeInfo
	i := strings.Index(s, " State=")
	if i < 0 {
		return NodeInfo{}, fmt.Errorf("scontrol show node %s: no State= in %.200q", name, s)
	}
	info.State, _, _ = strings.Cut(s[i+len(" State="):], " ")
	if i := strings.Index(s, " Reason="); i >= 0 {
		r := s[i+len(" Reason="):]
		if j := strings.LastIndex(r, " ["); j >= 0 && strings.HasSuffix(r, "]") {
			r = r[:j]
		}
		info.Reason = r
	}
	return info, nil
}
