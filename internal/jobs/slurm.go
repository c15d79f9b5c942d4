package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SlurmOptions configure the Slurm poller.
type SlurmOptions struct {
	Squeue   string        // path of squeue (default "squeue", from PATH)
	Scontrol string        // path of scontrol (default: beside Squeue)
	Every    time.Duration // poll interval (0: 30s); a job the nodes start asks sooner
	Timeout  time.Duration // per command (0: 10s)
	Env      []string      // the commands' environment (nil: the server's)
}

// maxOutput bounds what a Slurm command may answer.
const maxOutput = 64 << 20

// maxAsk bounds the `scontrol show job` calls per poll.
const maxAsk = 16

type slurmPoller struct {
	o       SlurmOptions
	m       *Manager
	wake    chan struct{}
	mu      sync.Mutex
	waiting map[string]int // ended jobs without Slurm's word: asks left
	lastErr string
}

func newSlurmPoller(o SlurmOptions, m *Manager) *slurmPoller {
	if o.Squeue == "" {
		o.Squeue = "squeue"
	}
	if o.Scontrol == "" {
		if i := strings.LastIndexByte(o.Squeue, '/'); i >= 0 {
			o.Scontrol = o.Squeue[:i+1] + "scontrol"
		} else {
			o.Scontrol = "scontrol"
		}
	}
	if o.Every <= 0 {
		o.Every = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	return &slurmPoller{o: o, m: m, wake: make(chan struct{}, 1), waiting: map[string]int{}}
}

func (p *slurmPoller) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// await asks Slurm about an ended job until it has a final word (3 tries).
func (p *slurmPoller) await(id string) {
	p.mu.Lock()
	if len(p.waiting) < 100000 {
		p.waiting[id] = 3
	}
	p.mu.Unlock()
	p.poke()
}

func (p *slurmPoller) run(ctx context.Context) {
	t := time.NewTicker(p.o.Every)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
			// A burst of new jobs asks once a second at most.
			if d := time.Until(last.Add(time.Second)); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		last = time.Now()
		p.poll(ctx)
	}
}

// fail counts a failed command and says so when the failure changes.
func (p *slurmPoller) fail(err error) {
	p.m.m.schedErrorsC.Inc()
	if msg := err.Error(); msg != p.lastErr {
		p.lastErr = msg
		p.m.log.Warn("slurm: jobs wait for their metadata", "err", err)
	}
}

func (p *slurmPoller) ok() {
	if p.lastErr != "" {
		p.lastErr = ""
		p.m.log.Info("slurm: answering again")
	}
}

// limitedBuffer keeps at most maxOutput bytes and remembers it had more.
// The buffer is a named field, not embedded: an embedded bytes.Buffer
// would lend its ReadFrom, which io.Copy (and so exec) prefers to Write,
// bypassing the bound.
type limitedBuffer struct {
	buf  bytes.Buffer
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) String() string { return b.buf.String() }
func (b *limitedBuffer) Bytes() []byte  { return b.buf.Bytes() }

func (p *slurmPoller) command(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = p.o.Env
	cmd.WaitDelay = time.Second
	var out, errOut limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("%s: no answer within %v", name, p.o.Timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	if out.over {
		return nil, fmt.Errorf("%s: answer longer than %d bytes", name, maxOutput)
	}
	return out.Bytes(), nil
}

// poll reads squeue --json, then asks scontrol about ended jobs squeue
// no longer lists.
func (p *slurmPoller) poll(ctx context.Context) {
	out, err := p.command(ctx, p.o.Squeue, "--json")
	if err != nil {
		if ctx.Err() == nil {
			p.fail(err)
		}
		return
	}
	jobs, err := parseSqueue(out)
	if err != nil {
		p.fail(fmt.Errorf("squeue --json: %w", err))
		return
	}
	p.ok()
	listed := make(map[string]bool, len(jobs))
	for i := range jobs {
		s := &jobs[i]
		listed[s.ID] = true
		if _, err := p.m.Update(s.ID, s.apply); err != nil {
			continue
		}
		if s.State.Final() {
			p.mu.Lock()
			delete(p.waiting, s.ID)
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	var ask []string
	for id := range p.waiting {
		if !listed[id] && len(ask) < maxAsk {
			ask = append(ask, id)
		}
	}
	p.mu.Unlock()
	for _, id := range ask {
		if ctx.Err() != nil {
			return
		}
		out, err := p.command(ctx, p.o.Scontrol, "-o", "show", "job", id)
		p.mu.Lock()
		p.waiting[id]--
		if p.waiting[id] <= 0 || strings.Contains(string(out), "Invalid job id") || (err != nil && strings.Contains(err.Error(), "Invalid job id")) {
			delete(p.waiting, id) // Slurm forgot it: the nodes' word stays
			err = nil
			out = nil
		}
		p.mu.Unlock()
		if err != nil {
			p.fail(err)
			continue
		}
		if len(out) == 0 {
			continue
		}
		s, err := parseScontrol(out)
		if err != nil || s.ID != id {
			p.fail(fmt.Errorf("scontrol show job %s: %v", id, err))
			continue
		}
		if _, err := p.m.Update(id, s.apply); err == nil && s.State.Final() {
			p.mu.Lock()
			delete(p.waiting, id)
			p.mu.Unlock()
		}
	}
}

// slurmJob is what Slurm says of a job.
type slurmJob struct {
	ID, User, Account, Partition, Name string
	Nodes                              []string
	CPUs, GPUs                         int
	MemBytes                           int64
	TimeLimit                          time.Duration
	Submit, Start, End                 time.Time
	State                              State
	ExitCode                           int
	HasExit                            bool
	fromHook                           bool // vigil job-event, not Slurm's commands
}

// apply fills j from Slurm's word: its metadata; its state unless the
// nodes know better (a job they ended stays ended until Slurm's final word).
func (s *slurmJob) apply(j *Job) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = clip(v)
		}
	}
	set(&j.User, s.User)
	set(&j.Account, s.Account)
	set(&j.Partition, s.Partition)
	set(&j.Name, s.Name)
	if len(j.Nodes) == 0 && len(s.Nodes) > 0 {
		j.Nodes = s.Nodes
	}
	if s.CPUs > 0 {
		j.CPUs = s.CPUs
	}
	if s.GPUs > 0 {
		j.GPUs = s.GPUs
	}
	if s.MemBytes > 0 {
		j.MemBytes = s.MemBytes
	}
	if s.TimeLimit > 0 {
		j.TimeLimit = Duration(s.TimeLimit)
	}
	if !s.Submit.IsZero() {
		j.Submit = s.Submit
	}
	if !s.Start.IsZero() && s.State != StatePending {
		j.Start = s.Start
	}
	switch {
	case s.State == StateEnded: // a hook's end without Slurm's word
		if j.End.IsZero() {
			j.End = s.End
		}
		if !j.State.Final() {
			j.State = StateEnded
		}
	case s.fromHook && s.State.Final() && j.State.Final():
		// An epilog's completed/failed does not replace Slurm's word.
	case s.State.Final():
		j.State = s.State
		if !s.End.IsZero() {
			j.End = s.End
		}
		if s.HasExit {
			j.ExitCode = s.ExitCode
		}
	case s.State == StatePending && j.State == "":
		j.State = StatePending
	case s.State == StateRunning && (j.State == "" || j.State == StatePending):
		j.State = StateRunning
	}
}

// slurmState maps Slurm's state words.
func slurmState(s string) State {
	s = strings.ToUpper(strings.TrimSpace(s))
	if i := strings.IndexByte(s, ' '); i >= 0 { // "CANCELLED by 0"
		s = s[:i]
	}
	switch s {
	case "OUT_OF_MEMORY":
		return StateOOM
	case "CANCELED":
		return StateCancelled
	}
	return State(clip(strings.ToLower(s)))
}

// squeueJSON is the part of `squeue --json` (OpenAPI v0.0.38, Slurm
// 22.05) read here; later versions wrap numbers as {"number": N, "set": b}.
type squeueJSON struct {
	Errors []json.RawMessage `json:"errors"`
	Jobs   []struct {
		JobID        json.RawMessage `json:"job_id"`
		UserName     string          `json:"user_name"`
		Account      string          `json:"account"`
		Partition    string          `json:"partition"`
		Name         string          `json:"name"`
		Nodes        string          `json:"nodes"`
		NodeCount    json.RawMessage `json:"node_count"`
		CPUs         json.RawMessage `json:"cpus"`
		MemPerNode   json.RawMessage `json:"memory_per_node"`
		MemPerCPU    json.RawMessage `json:"memory_per_cpu"`
		TimeLimit    json.RawMessage `json:"time_limit"`
		SubmitTime   json.RawMessage `json:"submit_time"`
		StartTime    json.RawMessage `json:"start_time"`
		EndTime      json.RawMessage `json:"end_time"`
		JobState     json.RawMessage `json:"job_state"`
		ExitCode     json.RawMessage `json:"exit_code"`
		TRESAllocStr string          `json:"tres_alloc_str"`
		TRESReqStr   string          `json:"tres_req_str"`
	} `json:"jobs"`
}

// number reads a JSON number, {"number": N, "set": true} or null.
func number(m json.RawMessage) (int64, bool) {
	m = bytes.TrimSpace(m)
	if len(m) == 0 || string(m) == "null" {
		return 0, false
	}
	if m[0] == '{' {
		var w struct {
			Set      *bool           `json:"set"`
			Infinite bool            `json:"infinite"`
			Number   json.RawMessage `json:"number"`
		}
		if json.Unmarshal(m, &w) != nil || w.Infinite || (w.Set != nil && !*w.Set) {
			return 0, false
		}
		return number(w.Number)
	}
	f, err := strconv.ParseFloat(string(m), 64)
	if err != nil || f != f || f > 1<<62 || f < -(1<<62) {
		return 0, false
	}
	return int64(f), true
}

func unixTime(m json.RawMessage) time.Time {
	if v, ok := number(m); ok && v > 0 {
		return time.Unix(v, 0).UTC()
	}
	return time.Time{}
}

func parseSqueue(b []byte) ([]slurmJob, error) {
	var q squeueJSON
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, err
	}
	if len(q.Errors) > 0 && len(q.Jobs) == 0 {
		return nil, fmt.Errorf("errors: %s", q.Errors[0])
	}
	out := make([]slurmJob, 0, len(q.Jobs))
	for _, r := range q.Jobs {
		id, ok := number(r.JobID)
		if !ok || id <= 0 {
			continue
		}
		s := slurmJob{ID: strconv.FormatInt(id, 10), User: r.UserName, Account: r.Account, Partition: r.Partition, Name: r.Name}
		var st string
		if json.Unmarshal(r.JobState, &st) != nil {
			var sts []string // later versions: a list of flags
			if json.Unmarshal(r.JobState, &sts) == nil && len(sts) > 0 {
				st = sts[0]
			}
		}
		s.State = slurmState(st)
		s.Nodes, _ = expandHostlist(r.Nodes, MaxNodes)
		if v, ok := number(r.CPUs); ok && v > 0 {
			s.CPUs = int(min(v, 1<<31-1))
		}
		nodes, _ := number(r.NodeCount)
		if v, ok := number(r.MemPerNode); ok && v > 0 {
			s.MemBytes = v << 20 * max(nodes, 1)
		} else if v, ok := number(r.MemPerCPU); ok && v > 0 {
			s.MemBytes = v << 20 * int64(max(s.CPUs, 1))
		}
		if v, ok := number(r.TimeLimit); ok && v > 0 {
			s.TimeLimit = time.Duration(v) * time.Minute
		}
		s.GPUs = tresGPUs(r.TRESAllocStr)
		if s.GPUs == 0 {
			s.GPUs = tresGPUs(r.TRESReqStr)
		}
		s.Submit, s.Start = unixTime(r.SubmitTime), unixTime(r.StartTime)
		if s.State.Final() {
			s.End = unixTime(r.EndTime)
			if v, ok := number(r.ExitCode); ok {
				s.ExitCode, s.HasExit = waitStatus(v), true
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// waitStatus turns a wait(2) status, as Slurm keeps exit codes, into a
// shell's exit code (128+signal for a signal).
func waitStatus(v int64) int {
	if sig := v & 0x7f; sig != 0 {
		return 128 + int(sig)
	}
	return int(v>>8) & 0xff
}

// tresGPUs reads gres/gpu=N from a TRES string.
func tresGPUs(s string) int {
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "gres/gpu" {
			n, _ := strconv.Atoi(v)
			return max(n, 0)
		}
	}
	return 0
}

// parseScontrol reads `scontrol -o show job ID` (key=value pairs; 22.05
// has no --json here). Times are the host's local time.
func parseScontrol(b []byte) (slurmJob, error) {
	kv := map[string]string{}
	var last string
	for _, f := range strings.Fields(string(bytes.TrimSpace(b))) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			if last != "" {
				kv[last] += " " + f // a value with spaces
			}
			continue
		}
		if _, dup := kv[k]; !dup {
			kv[k] = v
		}
		last = k
	}
	var s slurmJob
	s.ID = kv["JobId"]
	if !ValidID(s.ID) {
		return s, errors.New("no JobId=")
	}
	user := kv["UserId"]
	if i := strings.IndexByte(user, '('); i >= 0 {
		user = user[:i]
	}
	s.User, s.Name, s.Partition = user, kv["JobName"], kv["Partition"]
	if a := kv["Account"]; a != "(null)" {
		s.Account = a
	}
	s.State = slurmState(kv["JobState"])
	if n := kv["NodeList"]; n != "(null)" {
		s.Nodes, _ = expandHostlist(n, MaxNodes)
	}
	s.CPUs, _ = strconv.Atoi(kv["NumCPUs"])
	for _, t := range strings.Split(kv["TRES"], ",") {
		k, v, _ := strings.Cut(t, "=")
		switch k {
		case "mem":
			s.MemBytes = parseSize(v)
		case "gres/gpu":
			s.GPUs, _ = strconv.Atoi(v)
		}
	}
	s.TimeLimit = parseSlurmDuration(kv["TimeLimit"])
	s.Submit, s.Start, s.End = slurmTime(kv["SubmitTime"]), slurmTime(kv["StartTime"]), slurmTime(kv["EndTime"])
	if code, _, ok := strings.Cut(kv["ExitCode"], ":"); ok {
		if v, err := strconv.Atoi(code); err == nil {
			s.ExitCode, s.HasExit = v, true
		}
	}
	return s, nil
}

func slurmTime(v string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// parseSize reads Slurm's sizes: 100M, 2G, 512K, 1T (binary units).
func parseSize(v string) int64 {
	if v == "" {
		return 0
	}
	mult := int64(1 << 20) // Slurm's default unit is MB
	switch v[len(v)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'T':
		mult = 1 << 40
	}
	if v[len(v)-1] > '9' {
		v = v[:len(v)-1]
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1<<52 {
		return 0
	}
	return int64(f * float64(mult))
}

// parseSlurmDuration reads [days-]hours:minutes:seconds, minutes:seconds
// or minutes; UNLIMITED and the rest are 0.
func parseSlurmDuration(v string) time.Duration {
	var days int64
	if d, rest, ok := strings.Cut(v, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 32)
		if err != nil {
			return 0
		}
		days, v = n, rest
	}
	parts := strings.Split(v, ":")
	if len(parts) > 3 {
		return 0
	}
	var secs int64
	for _, p := range parts {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 0 {
			return 0
		}
		secs = secs*60 + n
	}
	switch {
	case len(parts) == 1 && days == 0:
		secs *= 60 // bare minutes
	case len(parts) == 2 && days > 0:
		secs *= 60 // days-hours:minutes
	case len(parts) == 1:
		secs *= 3600 // days-hours
	}
	return time.Duration(days*86400+secs) * time.Second
}

// expandHostlist expands Slurm's host lists ("cn[01-03,7],gpu1") into at
// most max names.
func expandHostlist(s string, max int) ([]string, error) {
	var out []string
	for len(s) > 0 {
		// One item: up to a comma outside brackets.
		depth, end := 0, len(s)
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '[':
				depth++
			case ']':
				depth--
			case ',':
				if depth == 0 {
					end = i
				}
			}
			if end != len(s) {
				break
			}
		}
		item := s[:end]
		s = strings.TrimPrefix(s[end:], ",")
		names, err := expandItem(item, max-len(out))
		if err != nil {
			return out, err
		}
		out = append(out, names...)
	}
	return out, nil
}

func expandItem(item string, room int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if item == "" {
			return nil, nil
		}
		if room < 1 {
			return nil, errors.New("host list: too many hosts")
		}
		return []string{item}, nil
	}
	closeAt := strings.IndexByte(item[open:], ']')
	if closeAt < 0 {
		return nil, fmt.Errorf("host list %q: no ]", item)
	}
	closeAt += open
	prefix, ranges, suffix := item[:open], item[open+1:closeAt], item[closeAt+1:]
	tails, err := expandItem(suffix, room) // a second bracket: cn[1-2]-ib[0-1]
	if err != nil {
		return nil, err
	}
	if len(tails) == 0 {
		tails = []string{""}
	}
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 10, 32)
		b, err2 := strconv.ParseUint(hi, 10, 32)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("host list: bad range %q", r)
		}
		if b-a >= uint64(room) {
			return nil, errors.New("host list: too many hosts")
		}
		for n := a; n <= b; n++ {
			num := strconv.FormatUint(n, 10)
			if pad := len(lo) - len(num); pad > 0 {
				num = strings.Repeat("0", pad) + num
			}
			for _, t := range tails {
				if len(out) >= room {
					return nil, errors.New("host list: too many hosts")
				}
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}
