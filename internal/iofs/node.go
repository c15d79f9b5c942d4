package iofs

import (
	"context"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is go-fuse's loopback node with the calls the contract counts
// wrapped; everything else (lookup, readdir, xattrs, links) passes through.
type node struct {
	*fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeTmpfiler    = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeStatxer     = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
)

// WrapChild makes every node of the tree a counting one.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fsys: n.fsys}
}

// path is the node's path as programs name it: under the mount point.
func (n *node) path(name string) string {
	return filepath.Join(n.fsys.mount, n.Path(nil), name)
}

func (n *node) regular() bool { return n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG }

// Open counts an open of the file by the caller and makes the handle
// direct I/O, so each read and write call reaches us (see openFlags).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	start := time.Now()
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	h, ok := n.fsys.newHandle(ctx, fh, n.path(""))
	if !ok {
		return fh, fl, 0
	}
	n.fsys.table.op(h.f, h.opener, cOpens, int64(time.Since(start)))
	return h, fl | n.fsys.openFlags.Load(), 0
}

// Create is open(O_CREAT) of a new file.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	start := time.Now()
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, ok := n.fsys.newHandle(ctx, fh, n.path(name))
	if !ok {
		return ch, fh, fl, 0
	}
	n.fsys.table.op(h.f, h.opener, cOpens, int64(time.Since(start)))
	return ch, h, fl | n.fsys.openFlags.Load(), 0
}

// Tmpfile (O_TMPFILE) has no name: it counts under its directory.
func (n *node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	start := time.Now()
	ch, fh, fl, errno := n.LoopbackNode.Tmpfile(ctx, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, ok := n.fsys.newHandle(ctx, fh, n.path(""))
	if !ok {
		return ch, fh, fl, 0
	}
	n.fsys.table.op(h.f, h.opener, cOpens, int64(time.Since(start)))
	return ch, h, fl | n.fsys.openFlags.Load(), 0
}

// Getattr counts a stat of a regular file: only the ones the kernel does
// not answer from its attribute cache reach us.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	start := time.Now()
	errno := n.LoopbackNode.Getattr(ctx, f, out)
	n.countMeta(ctx, f, cStats, start)
	return errno
}

// Statx is the statx form of Getattr.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	start := time.Now()
	errno := n.LoopbackNode.Statx(ctx, f, flags, mask, out)
	n.countMeta(ctx, f, cStats, start)
	return errno
}

// Setattr (truncate, chmod, chown, utimes) counts as other metadata.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	start := time.Now()
	errno := n.LoopbackNode.Setattr(ctx, f, in, out)
	n.countMeta(ctx, f, cMetaOther, start)
	return errno
}

func (n *node) countMeta(ctx context.Context, f fs.FileHandle, idx int, start time.Time) {
	if !n.regular() {
		return
	}
	if h, ok := f.(*handle); ok {
		n.fsys.table.op(h.f, h.pid(ctx), idx, int64(time.Since(start)))
		return
	}
	pid := n.fsys.callerPid(ctx)
	n.fsys.table.opPath(n.path(""), pid, idx, int64(time.Since(start)))
}

// Unlink counts as other metadata of the removed file.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	start := time.Now()
	errno := n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 {
		n.fsys.table.opPath(n.path(name), n.fsys.callerPid(ctx), cMetaOther, int64(time.Since(start)))
	}
	return errno
}

// Rename counts as other metadata of the file under its old name.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	start := time.Now()
	np := newParent
	if w, ok := newParent.(*node); ok {
		np = w.LoopbackNode // the loopback checks its own type
	}
	errno := n.LoopbackNode.Rename(ctx, name, np, newName, flags)
	if errno == 0 {
		n.fsys.table.opPath(n.path(name), n.fsys.callerPid(ctx), cMetaOther, int64(time.Since(start)))
	}
	return errno
}

// handle is an open file: go-fuse's loopback file with reads, writes,
// flushes, syncs and seeks counted per calling process.
type handle struct {
	*fs.LoopbackFile
	fsys    *FS
	f       *file
	fd      int
	opener  uint32 // process that opened it: owner of kernel-initiated I/O
	lastEnd int64  // end of the previous access, -1 before the first; under the table's lock
}

var (
	_ fs.FileReader          = (*handle)(nil)
	_ fs.FileWriter          = (*handle)(nil)
	_ fs.FileWritever        = (*handle)(nil)
	_ fs.FileFlusher         = (*handle)(nil)
	_ fs.FileFsyncer         = (*handle)(nil)
	_ fs.FileLseeker         = (*handle)(nil)
	_ fs.FileAllocater       = (*handle)(nil)
	_ fs.FileReleaser        = (*handle)(nil)
	_ fs.FilePassthroughFder = (*handle)(nil)
)

// newHandle wraps the loopback's handle; another kind (none today) is
// passed through uncounted rather than failing the open.
func (fsys *FS) newHandle(ctx context.Context, fh fs.FileHandle, path string) (*handle, bool) {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return nil, false
	}
	fd, ok := lf.PassthroughFd() // owned by lf until Release
	if !ok {
		return nil, false
	}
	return &handle{LoopbackFile: lf, fsys: fsys, f: fsys.table.acquire(path), fd: fd,
		opener: fsys.callerPid(ctx), lastEnd: -1}, true
}

// pid is the process the request counts for: the caller's, or the opener's
// when the kernel itself sent it (writeback of mmap'ed pages).
func (h *handle) pid(ctx context.Context) uint32 {
	if p := h.fsys.callerPid(ctx); p != 0 {
		return p
	}
	return h.opener
}

// PassthroughFd refuses kernel passthrough, which would bypass counting.
func (h *handle) PassthroughFd() (int, bool) { return 0, false }

// Read serves a read() or an mmap page-in. The data does not pass through
// here: go-fuse splices it from h.fd after Read returns, so the time
// counted is only this bookkeeping. (Counting in the result's Done, after
// the reply, would let the reader's close be counted before its read.)
func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	// The reply is spliced from the source file to /dev/fuse (one copy
	// fewer than reading into buf); the count is what that splice will
	// carry: the request cut at the file's end.
	start := time.Now()
	var st syscall.Stat_t
	if err := syscall.Fstat(h.fd, &st); err != nil {
		return nil, fs.ToErrno(err)
	}
	n := int(max(0, min(int64(len(buf)), st.Size-off)))
	ns := int64(time.Since(start))
	h.fsys.table.access(h, h.pid(ctx), false, off, n, ns)
	return fuse.ReadResultFd(uintptr(h.fd), off, n), 0
}

// Write serves a write() (or the writeback of a shared mapping).
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	start := time.Now()
	n, err := syscall.Pwrite(h.fd, data, off)
	ns := int64(time.Since(start))
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	h.fsys.table.access(h, h.pid(ctx), true, off, n, ns)
	return uint32(n), 0
}

// Writev is Write with the data in pieces.
func (h *handle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	start := time.Now()
	n, err := unix.Pwritev(h.fd, data, off)
	ns := int64(time.Since(start))
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	h.fsys.table.access(h, h.pid(ctx), true, off, n, ns)
	return uint32(n), 0
}

// Flush is sent on every close() of a descriptor of the file: a close.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	start := time.Now()
	errno := h.LoopbackFile.Flush(ctx)
	h.fsys.table.op(h.f, h.pid(ctx), cCloses, int64(time.Since(start)))
	return errno
}

// Fsync is fsync() or fdatasync().
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	start := time.Now()
	errno := h.LoopbackFile.Fsync(ctx, flags)
	h.fsys.table.op(h.f, h.pid(ctx), cSyncs, int64(time.Since(start)))
	return errno
}

// Lseek: the kernel forwards only SEEK_DATA and SEEK_HOLE.
func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	start := time.Now()
	r, errno := h.LoopbackFile.Lseek(ctx, off, whence)
	h.fsys.table.op(h.f, h.pid(ctx), cSeeks, int64(time.Since(start)))
	return r, errno
}

// Allocate is fallocate(): other metadata.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	start := time.Now()
	errno := h.LoopbackFile.Allocate(ctx, off, size, mode)
	h.fsys.table.op(h.f, h.pid(ctx), cMetaOther, int64(time.Since(start)))
	return errno
}

// Release comes once the last descriptor and mapping are gone, often from
// no process in particular: it closes the file and is not counted.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.fsys.table.release(h.f)
	return h.LoopbackFile.Release(ctx)
}
