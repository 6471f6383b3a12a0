package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// appendNode is a partition's append (values) or append.jsonl file:
// write-only, always empty, each line written to it becomes a record.
type appendNode struct {
	gofs.Inode
	ps    *partState
	jsonl bool
}

var (
	_ = (gofs.NodeGetattrer)((*appendNode)(nil))
	_ = (gofs.NodeSetattrer)((*appendNode)(nil))
	_ = (gofs.NodeOpener)((*appendNode)(nil))
)

func (n *appendNode) name() string {
	if n.jsonl {
		return n.ps.path("append.jsonl")
	}
	return n.ps.path("append")
}

func (n *appendNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.ps.f.setAttr(&out.Attr, n.StableAttr().Ino, modeAppend, 0, n.ps.p.ModTime())
	out.SetTimeout(n.ps.f.opts.AttrTimeout)
	return 0
}

// Setattr accepts what shells and touch send: the truncate to 0 of
// `echo x > append` (the kernel sends it as a SETATTR after the open) and
// new times, both of which change nothing. Other sizes are EINVAL, owner
// and mode changes EPERM.
func (n *appendNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f := n.ps.f
	if f.readOnly {
		return syscall.EROFS
	}
	if size, ok := in.GetSize(); ok && size != 0 {
		return syscall.EINVAL
	}
	if in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		return syscall.EPERM
	}
	return n.Getattr(ctx, fh, out)
}

// Open returns a handle with its own partial-line buffer. Writes use
// direct I/O, so each write(2) of up to MaxWrite bytes arrives as one
// request, in the writer's own sizes, not re-chunked by the page cache.
func (n *appendNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY && n.ps.f.readOnly {
		return nil, 0, syscall.EROFS
	}
	return &appendHandle{n: n}, fuse.FOPEN_DIRECT_IO, 0
}

// appendHandle frames the bytes written through one open file description
// into records, one per '\n'-terminated line.
//
// Each write's complete lines (the first one joined to the partial line
// left by earlier writes) go to the partition in one append: one batch,
// atomic. The bytes after the last newline wait in partial for the next
// write, and are appended as a record of their own when the file is
// released (not at FLUSH, which shells send early and per dup). A write
// that fails appends nothing: an oversized or malformed line fails with
// EFBIG or EINVAL, and is dropped whole, including the part of it an
// earlier write buffered; ENOSPC and EIO leave the handle as it was, so
// the write can be retried.
//
// No byte of a refused line is ever appended, though the kernel may hand
// its end to a later write: it splits a large write(2) into requests, and
// when one after the first fails it reports the count of those before as
// a short write, without the error, and the writer sends the rest again.
// So once a line is refused, every write that holds more of it is refused
// too, up to and including the one that holds its newline (dropping);
// and when a refused write held the end of a line that began in an
// earlier one, a write that begins with the same bytes is refused again
// (refused), so that the writer sees the error even when the kernel hid
// it, and a writer that sends them again on close (Python's buffered
// files do) appends none of them.
type appendHandle struct {
	n *appendNode

	mu       sync.Mutex
	partial  []byte           // GUARDED_BY(mu): bytes after the last newline
	held     int64            // GUARDED_BY(mu): len(partial) as counted in logFS.partial
	dropping bool             // GUARDED_BY(mu): refusing the rest of an oversized line
	refused  []byte           // GUARDED_BY(mu): the end of a refused line, through its newline
	whyNot   error            // GUARDED_BY(mu): why that line was refused
	recs     []storage.Record // GUARDED_BY(mu): scratch of append.jsonl
	values   [][]byte         // GUARDED_BY(mu): scratch of append
	ends     []int            // GUARDED_BY(mu): scratch
}

var (
	_ = (gofs.FileWriter)((*appendHandle)(nil))
	_ = (gofs.FileReader)((*appendHandle)(nil))
	_ = (gofs.FileReleaser)((*appendHandle)(nil))
	_ = (gofs.FileFsyncer)((*appendHandle)(nil))
	_ = (gofs.FileFlusher)((*appendHandle)(nil))
)

// Read gives nothing: the append files are write-only and always empty.
func (h *appendHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

// Flush does nothing: see the type's comment.
func (h *appendHandle) Flush(ctx context.Context) syscall.Errno { return 0 }

// Fsync returns once every record appended to the partition so far
// (through this handle and any other way) is durable. A partial line is
// not a record yet and stays buffered.
func (h *appendHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if err := h.n.ps.syncAppends(); err != nil {
		return h.n.ps.f.errno(err, "fsync", h.n.name())
	}
	return 0
}

// Write ignores the offset (the file is append-only, whatever the flags)
// and frames data into records.
func (h *appendHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, err := h.write(ctx, data)
	if err != nil {
		return uint32(n), h.n.ps.f.errno(err, "write", h.n.name())
	}
	return uint32(n), 0
}

// config returns the topic's settings in force for the records of this
// file. Locally a record must fit max.message.bytes and segment.bytes
// (storage.Config.RecordLimit); on a cluster the copy's segment.bytes
// binds nothing (the cluster's segments take the records), and the
// cluster's max.message.bytes, which the copy's topic has, does.
func (h *appendHandle) config() storage.Config {
	cfg := h.n.ps.p.Topic().Config()
	if h.n.ps.f.c != nil {
		cfg.SegmentBytes = 0 // does not count
	}
	return cfg
}

// limitChanged asks a mounted cluster, before a line is refused as over
// the topic's max.message.bytes the copy knows, whether it changed there
// since (raised, or lowered: kafka.Cluster.ProduceAt learns that from the
// broker too); cfg, limit and setting then hold the new one.
func (h *appendHandle) limitChanged(ctx context.Context, cfg *storage.Config, limit *int64, setting *string) bool {
	c := h.n.ps.f.c
	if c == nil || !c.RefreshLimit(ctx, h.n.ps.p) {
		return false
	}
	*cfg = h.config()
	*limit, *setting = cfg.RecordLimit()
	return true
}

// tooLong reports whether a line already n bytes long can no longer become
// a record under limit, whatever follows. For values the line is the
// value; a JSON line can encode a value in as little as a sixth of its
// length (\u0000 escapes).
func (h *appendHandle) tooLong(n int, limit int64) bool {
	if h.n.jsonl {
		return int64(n) > 6*limit+4096
	}
	return int64(record.HeaderSize+n) > limit
}

// write frames data and returns how many of its bytes were taken. On an
// error nothing of the returned count's remainder was appended. A count
// short of len(data) with no error happens when the bytes after the last
// newline already make an oversized line: the complete lines are
// appended, and the kernel hands the rest to the next write, which fails
// with EFBIG.
func (h *appendHandle) write(ctx context.Context, data []byte) (int, error) {
	cfg := h.config()
	limit, setting := cfg.RecordLimit()
	if h.refused != nil {
		// The kernel may split the same bytes differently the second
		// time: a first request shorter than them is refused too.
		if bytes.HasPrefix(data, h.refused) || bytes.HasPrefix(h.refused, data) {
			return 0, fmt.Errorf("%w: the end of a refused line, sent again", h.whyNot)
		}
		h.refused, h.whyNot = nil, nil
	}
	if h.dropping {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return 0, fmt.Errorf("%w: more of a line over %s (%d)", storage.ErrRecordTooLarge, setting, limit)
		}
		h.dropping = false
		h.refused, h.whyNot = bytes.Clone(data[:i+1]), storage.ErrRecordTooLarge
		return 0, fmt.Errorf("%w: the end of a line over %s (%d), and the write that holds it", storage.ErrRecordTooLarge, setting, limit)
	}
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		if n := len(h.partial) + len(data); h.tooLong(n, limit) && (!h.limitChanged(ctx, &cfg, &limit, &setting) || h.tooLong(n, limit)) {
			h.partial, h.dropping = nil, true
			h.hold(0)
			return 0, fmt.Errorf("%w: a line of more than %d bytes, over %s (%d)", storage.ErrRecordTooLarge, n, setting, limit)
		}
		if err := h.hold(len(h.partial) + len(data)); err != nil {
			return 0, err
		}
		h.partial = append(h.partial, data...)
		return len(data), nil
	}
	complete, tail := data[:last+1], data[last+1:]
	taken := len(data)
	if h.tooLong(len(tail), limit) {
		tail, taken = nil, last+1
	}
	if len(tail) > len(h.partial) && h.hold(len(tail)) != nil {
		// No room to keep the tail: the kernel hands it to the next write.
		tail, taken = nil, last+1
	}

	// The first line is the buffered partial line and the start of data.
	first := bytes.IndexByte(complete, '\n')
	var firstLine []byte
	if len(h.partial) > 0 {
		firstLine = append(h.partial, complete[:first]...)
	} else {
		firstLine = complete[:first]
	}
	n, bad, err := h.frame(firstLine, complete, first+1, &cfg)
	if errors.Is(err, storage.ErrRecordTooLarge) && h.limitChanged(ctx, &cfg, &limit, &setting) {
		n, bad, err = h.frame(firstLine, complete, first+1, &cfg)
	}
	if err != nil {
		if bad == 0 && len(h.partial) > 0 {
			// The bad line began in an earlier write: drop it all, and
			// refuse its end if it comes again.
			h.clearPartial()
			h.refused, h.whyNot = bytes.Clone(data[:first+1]), err
		}
		return 0, err
	}
	var done int
	if h.n.jsonl {
		done, err = h.n.ps.appendRecords(ctx, h.recs[:n])
	} else {
		done, err = h.n.ps.appendValues(ctx, h.values[:n])
	}
	if err != nil && done == 0 {
		if errors.Is(err, syscall.ETIMEDOUT) {
			// A cluster did not acknowledge the records in time, and
			// may have appended them all the same: the buffered start of
			// the first line went with them. Keep no piece of it, and
			// refuse these bytes if they come again, as after a short
			// write that timed out.
			h.clearPartial()
			h.refused, h.whyNot = bytes.Clone(data), err
		}
		return 0, err
	}
	if done < n {
		// A cluster appended the first lines and failed a later batch:
		// the write is short, and the writer sends the rest again. When
		// that batch may have been appended all the same (err: it timed
		// out), the rest is refused when it comes again, with err, so
		// that the writer learns it and appends no second copy.
		h.clearPartial()
		h.n.ps.invalidate()
		if err != nil {
			h.refused, h.whyNot = bytes.Clone(data[h.ends[done-1]:]), err
		}
		return h.ends[done-1], nil
	}
	if len(tail) == 0 {
		h.clearPartial()
	} else {
		h.partial = append(h.partial[:0], tail...)
		h.hold(len(tail))
	}
	// The record files are other inodes than this one: invalidating them
	// here is safe, and makes the records visible to a read that follows
	// this write(2).
	h.n.ps.invalidate()
	return taken, nil
}

// frame turns lines into records: firstLine, which ends at byte end of
// complete, then each line of complete after it. It puts them in the
// handle's scratch, h.values for append (each line is a value) and h.recs
// for append.jsonl, with where in complete each one's line ends in
// h.ends, and returns how many there are; or the number of the first line
// that cannot be a record (bad) and why. The records alias the lines.
//
// A 1 MiB write of 100-byte lines is ten thousand of them: a line of the
// append file becomes its value in place, with no call or copy beyond the
// check of its size.
func (h *appendHandle) frame(firstLine, complete []byte, end int, cfg *storage.Config) (n, bad int, err error) {
	h.recs, h.values, h.ends = h.recs[:0], h.values[:0], h.ends[:0]
	fit := cfg.SureFit()
	line := firstLine
	for i := 0; ; i++ {
		if h.n.jsonl {
			r, skip, err := h.record(line, *cfg)
			if err != nil {
				return 0, i, err
			}
			if !skip {
				h.recs = append(h.recs, r)
				h.ends = append(h.ends, end)
			}
		} else {
			if len(line) > fit {
				if err := cfg.CheckRecord(&storage.Record{Value: line}); err != nil {
					return 0, i, err
				}
			}
			h.values = append(h.values, line)
			h.ends = append(h.ends, end)
		}
		if end == len(complete) {
			return len(h.ends), -1, nil
		}
		j := bytes.IndexByte(complete[end:], '\n')
		line, end = complete[end:end+j], end+j+1
	}
}

// record turns one line (without its newline) into a record, or fails
// with ErrInvalidRecord or ErrRecordTooLarge. Blank lines of append.jsonl
// are skipped; in append, an empty line is a record with an empty value.
func (h *appendHandle) record(line []byte, cfg storage.Config) (r storage.Record, skip bool, err error) {
	if h.n.jsonl {
		if len(bytes.TrimSpace(line)) == 0 {
			return r, true, nil
		}
		if r, err = storage.ParseJSONRecord(line); err != nil {
			return r, false, err
		}
	} else {
		r.Value = line
	}
	return r, false, cfg.CheckRecord(&r)
}

// Release appends the partial line left by the last write, if any. The
// kernel sends RELEASE after the last descriptor of the open file is
// closed, and does not wait for it: close(2) may return before the record
// is there. The request's context is not what the append runs under: the
// kernel never interrupts a RELEASE, and go-fuse cancels every request
// still running when the mount goes, which would drop a line whose
// close(2) returned (an umount right after the close).
//
// To a cluster the append takes a round trip, and up to
// delivery.timeout.ms when the cluster does not answer: it runs on a
// goroutine of its own, not on the go-fuse loop that read the request,
// which an unmount waits for. The mount's shutdown waits for it instead,
// after the kernel's connection is gone.
func (h *appendHandle) Release(ctx context.Context) syscall.Errno {
	f := h.n.ps.f
	if f.c == nil {
		h.release(true) // locally a quick append
		return 0
	}
	f.releases.Add(1)
	go func() {
		defer f.releases.Done()
		h.release(true)
	}()
	return 0
}

// release appends the partial line, if any, and lets go of it; the
// mount's shutdown calls it, without invalidating the kernel's caches, for
// the handles whose RELEASE never came. The append runs under the mount's
// releaseCtx: a cluster that does not answer holds it up to
// delivery.timeout.ms, unless the stopping mount gives up (Server.GiveUp).
func (h *appendHandle) release(invalidate bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.partial) == 0 || h.dropping {
		h.partial = nil
		h.hold(0)
		return
	}
	f := h.n.ps.f
	// The context first, then the count: a give-up that Appending counted
	// this append for ends the context it runs under.
	ctx := f.releaseContext()
	f.releasing.Add(1)
	defer f.releasing.Add(-1)
	if releaseHook != nil {
		releaseHook()
	}
	r, skip, err := h.record(h.partial, h.config())
	if err == nil && !skip {
		if _, err = h.n.ps.appendRecords(ctx, []storage.Record{r}); err == nil && invalidate {
			h.n.ps.invalidate()
		}
	}
	lost := len(h.partial)
	h.partial = nil
	h.hold(0)
	if err != nil {
		// Its write(2) and close(2) returned long ago: nobody is left to
		// tell but the log, and a line is lost.
		f.log.Error("logfs: the unterminated last line of an append file was not appended", "path", h.n.name(), "bytes", lost, "err", err)
	}
}

// releaseHook, when set (by a test), is called by release once the append
// is counted in logFS.releasing.
var releaseHook func()

// PartialBudget bounds the bytes of unfinished lines (written without
// their newline yet) that all the append files of a mount hold together,
// whoever opened them: each handle holds at most one line of
// max.message.bytes (six times that for append.jsonl), and past this
// total a write that would buffer more fails with ENOBUFS, leaving the
// handle as it was, so that it can be tried again once others finish
// their lines or close. Lines that end in the write are not counted: they
// are appended at once.
var PartialBudget int64 = 64 << 20

// hold counts n bytes, the new length of partial, against PartialBudget
// in place of what the handle held before, or fails with ENOBUFS and
// changes nothing when that would go over it. Shrinking never fails.
func (h *appendHandle) hold(n int) error {
	f := h.n.ps.f
	d := int64(n) - h.held
	if d > 0 {
		if total := f.partial.Add(d); total > PartialBudget {
			f.partial.Add(-d)
			return fmt.Errorf("%w: the unfinished lines of open append files already hold %d bytes, the most a mount keeps (%d); end lines with a newline or close files", syscall.ENOBUFS, total-d, PartialBudget)
		}
	} else if d < 0 {
		f.partial.Add(d)
	}
	if was := h.held > 0; was != (n > 0) { // registered while it holds a line
		f.unfinishedMu.Lock()
		if n > 0 {
			if f.unfinished == nil {
				f.unfinished = make(map[*appendHandle]struct{})
			}
			f.unfinished[h] = struct{}{}
		} else {
			delete(f.unfinished, h)
		}
		f.unfinishedMu.Unlock()
	}
	h.held = int64(n)
	return nil
}

// clearPartial empties partial, giving back a large buffer's memory.
func (h *appendHandle) clearPartial() {
	if cap(h.partial) > 64<<10 {
		h.partial = nil
	} else {
		h.partial = h.partial[:0]
	}
	h.hold(0)
}
