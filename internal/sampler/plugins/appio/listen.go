package appio

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/procs"
)

// parseJob is the procs plugin's reading of job_<n> in a cgroup file.
var parseJob = procs.ParseJob

// listen makes the socket unless it is there and ours. A live socket of
// another sampler is left alone; a stale one (nobody accepting) is
// removed. The first failure is logged as a warning, later ones at debug.
func (p *Plugin) listen() {
	p.lnMu.Lock()
	defer p.lnMu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	if p.ln != nil {
		if ino := fileIno(p.path); ino == p.lnIno && ino != 0 {
			return
		}
		p.log.Warn("appio socket was removed or replaced; making it again", "path", p.path)
		p.closeListener(false)
	}
	ln, err := p.makeSocket()
	if err != nil {
		if !p.warned {
			p.warned = true
			p.log.Warn("cannot listen for application I/O; appio reports nothing until it can", "path", p.path, "err", err)
		} else {
			p.log.Debug("cannot listen for application I/O", "path", p.path, "err", err)
		}
		return
	}
	p.ln, p.lnIno = ln, fileIno(p.path)
	p.listening.Store(true)
	p.log.Info("listening for application I/O", "path", p.path)
	p.wg.Add(1)
	go p.accept(ln)
}

func (p *Plugin) makeSocket() (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(p.path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", p.path)
		}
		if c, err := net.DialTimeout("unixpacket", p.path, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s is in use by another process", p.path)
		}
		if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: p.path, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	// Removed by Close only while it is still this socket.
	ln.SetUnlinkOnClose(false)
	// Any user's program may report: each connection is authenticated by
	// the kernel's credentials, never by what it says.
	if err := os.Chmod(p.path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// closeListener closes the listener; unlink removes the socket file if it
// is still the one made. Called with lnMu held.
func (p *Plugin) closeListener(unlink bool) {
	if p.ln == nil {
		return
	}
	if unlink && p.lnIno != 0 && fileIno(p.path) == p.lnIno {
		os.Remove(p.path)
	}
	p.ln.Close()
	p.ln, p.lnIno = nil, 0
	p.listening.Store(false)
}

// accept takes connections until the listener is closed.
func (p *Plugin) accept(ln *net.UnixListener) {
	defer p.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		uc, err := ln.AcceptUnix()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait, do not spin.
			p.log.Debug("accept on the appio socket", "err", err)
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if p.nConns.Load() >= int64(p.cfg.MaxConns) {
			p.rejCap.Add(1)
			uc.Close()
			continue
		}
		c, err := p.newConn(uc)
		if err != nil {
			p.rejBad.Add(1)
			p.log.Debug("appio connection without credentials", "err", err)
			uc.Close()
			continue
		}
		p.lnMu.Lock()
		if p.ctx.Err() != nil {
			p.lnMu.Unlock()
			uc.Close()
			return
		}
		if p.perUID[c.uid] >= p.cfg.MaxConnsPerUID {
			p.lnMu.Unlock()
			p.rejCap.Add(1)
			uc.Close()
			continue
		}
		p.perUID[c.uid]++
		p.conns[c] = struct{}{}
		p.nConns.Add(1)
		p.accepted.Add(1)
		p.wg.Add(1)
		p.lnMu.Unlock()
		go p.serve(c)
	}
}

// conn is one connected process. Its fields are the serving goroutine's
// own, except job's counts, which are under mu.
type conn struct {
	c        *net.UnixConn
	pid, uid uint32
	trusted  bool // may name other processes (vigil iofs)
	hello    bool
	rank     int32
	exe      string
	job      *jobAcc
	jobID    string
	files    map[uint32]*fileEnt
	pidJobs  map[uint32]string // trusted: jobs of the processes named
	recJobs  []string
}

type fileEnt struct {
	path, point, fstype string
	pid                 uint32 // 0: the connection's
}

// helloTimeout is how long a new connection may wait before its HELLO
// (a variable for tests).
var helloTimeout = 10 * time.Second

// maxPathBytes bounds the paths of the files known over all connections.
const maxPathBytes = 64 << 20

// maxPIDJobs bounds a trusted connection's cache of pid → job.
const maxPIDJobs = 4096

func (p *Plugin) newConn(uc *net.UnixConn) (*conn, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	pid, uid, err := peerCred(rc)
	if err != nil {
		return nil, err
	}
	return &conn{c: uc, pid: pid, uid: uid, rank: -1, trusted: slices.Contains(p.cfg.IOFSUIDs, uid),
		files: make(map[uint32]*fileEnt)}, nil
}

// serve reads the connection's messages until it closes or breaks the
// protocol. The 64 KiB buffer is taken only while a message is there, so
// idle connections hold none.
func (p *Plugin) serve(c *conn) {
	defer p.wg.Done()
	defer p.drop(c)
	rc, err := c.c.SyscallConn()
	if err != nil {
		return
	}
	// A connection must say HELLO soon: an idle one holds a place.
	c.c.SetReadDeadline(time.Now().Add(helloTimeout))
	for {
		var herr error
		var closed bool
		err := rc.Read(func(fd uintptr) bool {
			bp := p.bufs.Get().(*[]byte)
			defer p.bufs.Put(bp)
			n, again, rerr := recvMsg(fd, *bp)
			switch {
			case again:
				return false
			case rerr != nil || n == 0:
				closed = true
			case n > len(*bp):
				herr = fmt.Errorf("%w: message of %d bytes, more than %d", appio.ErrHeader, n, appio.MaxMessage)
			default:
				herr = p.handle(c, (*bp)[:n])
			}
			return true
		})
		if err != nil || closed {
			return
		}
		if herr != nil {
			p.rejBad.Add(1)
			p.log.Debug("appio connection closed for a protocol violation", "pid", c.pid, "uid", c.uid, "err", herr)
			return
		}
	}
}

// drop forgets a closed connection: its job loses a process and its files.
func (p *Plugin) drop(c *conn) {
	c.c.Close()
	p.lnMu.Lock()
	delete(p.conns, c)
	if p.perUID[c.uid]--; p.perUID[c.uid] <= 0 {
		delete(p.perUID, c.uid)
	}
	p.lnMu.Unlock()
	p.nConns.Add(-1)
	if c.job != nil {
		p.lock()
		c.job.procs--
		c.job.files -= len(c.files)
		for _, f := range c.files {
			p.pathBytes -= len(f.path)
		}
		c.job.active = time.Now()
		p.mu.Unlock()
	}
}

// handle applies one message.
func (p *Plugin) handle(c *conn, msg []byte) error {
	t, payload, err := appio.ParseHeader(msg)
	if err != nil {
		return err
	}
	if (t == appio.TypeFile || t == appio.TypeInterval || t == appio.TypeBye) && !c.hello {
		return fmt.Errorf("%w: message type %d before HELLO", appio.ErrMessage, t)
	}
	switch t {
	case appio.TypeHello:
		if c.hello {
			return fmt.Errorf("%w: second HELLO", appio.ErrMessage)
		}
		h, err := appio.DecodeHello(payload)
		if err != nil {
			return err
		}
		c.hello, c.rank, c.exe = true, h.Rank, labelSafe(h.Exe)
		c.c.SetReadDeadline(time.Time{})
		// The job cgroup is the kernel's word; the environment only where
		// there is none.
		c.jobID = p.jobOf(c.pid)
		if c.jobID == "" && validJobID(h.JobID) {
			c.jobID = h.JobID
		}
		p.lock()
		c.job = p.job(c.jobID, time.Now())
		c.job.procs++
		p.mu.Unlock()
	case appio.TypeFile:
		f, err := appio.DecodeFile(payload)
		if err != nil {
			return err
		}
		p.addFile(c, f)
	case appio.TypeInterval:
		rp := p.recs.Get().(*[]appio.Record)
		defer p.recs.Put(rp)
		iv, err := appio.DecodeInterval(payload, *rp)
		if err != nil {
			return err
		}
		*rp = iv.Records[:0]
		p.addInterval(c, &iv)
	}
	return nil // BYE and unknown types: nothing to do
}

// validJobID accepts a SLURM_JOB_ID: digits, not too many.
func validJobID(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (p *Plugin) addFile(c *conn, f appio.File) {
	ent := &fileEnt{path: f.Path, point: Other}
	if c.trusted && f.PID != c.pid {
		ent.pid = f.PID
	}
	if m, ok := p.mounts.Load().lookup(f.Path); ok {
		ent.point, ent.fstype = m.point, m.fstype
	}
	old, known := c.files[f.ID]
	p.lock()
	grow := len(f.Path)
	if known {
		grow -= len(old.path)
	}
	full := !known && c.job.files >= p.cfg.MaxFilesPerJob || p.pathBytes+grow > maxPathBytes
	if !full {
		p.pathBytes += grow
		if !known {
			c.job.files++
		}
	}
	p.mu.Unlock()
	if full {
		return // its records go to "other", counted there
	}
	c.files[f.ID] = ent
}

// addInterval accumulates an interval's records. Jobs of other processes
// (trusted connections only) are looked up before taking the lock.
func (p *Plugin) addInterval(c *conn, iv *appio.Interval) {
	c.recJobs = c.recJobs[:0]
	for i := range iv.Records {
		r := &iv.Records[i]
		pid := r.PID
		if ent := c.files[r.FileID]; ent != nil && pid == 0 {
			pid = ent.pid
		}
		if !c.trusted || pid == c.pid {
			pid = 0 // a client speaks for itself only
		}
		r.PID = pid
		id := c.jobID
		if pid != 0 {
			var ok bool
			if id, ok = c.pidJobs[pid]; !ok {
				id = p.jobOf(pid)
				if c.pidJobs == nil || len(c.pidJobs) >= maxPIDJobs {
					c.pidJobs = make(map[uint32]string)
				}
				c.pidJobs[pid] = id
			}
		}
		c.recJobs = append(c.recJobs, id)
	}
	now := time.Now()
	p.lock()
	defer p.mu.Unlock()
	for i := range iv.Records {
		r := &iv.Records[i]
		if r.Zero() {
			continue
		}
		p.nRecords.Add(1)
		j := c.job
		if r.PID != 0 {
			j = p.job(c.recJobs[i], now)
		}
		j.active = now
		point, fstype, path := Other, "", ""
		if ent := c.files[r.FileID]; ent != nil {
			point, fstype, path = ent.point, ent.fstype, ent.path
		} else {
			p.foldFile.Add(1)
		}
		p.mount(j, point, fstype).add(r)
		pid := r.PID
		if pid == 0 {
			pid = c.pid
		}
		fr := FileRecord{Start: int64(iv.Start), End: int64(iv.End), JobID: c.jobID, PID: pid, UID: c.uid,
			Rank: c.rank, Exe: c.exe, Path: path, MountPoint: point, FSType: fstype, Counters: r.C}
		if r.PID != 0 {
			fr.JobID, fr.Rank = c.recJobs[i], -1 // another process: its rank is not known here
		}
		p.keep(&fr)
	}
}
