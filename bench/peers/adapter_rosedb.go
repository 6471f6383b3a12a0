package peers

import (
	"errors"
	"fmt"
	"io"

	rw "github.com/rosedblabs/wal"
)

// rosedblabs/wal v1.3.8: LevelDB-style 32 KiB blocks of CRC'd chunks in
// %09d.SEG segments, no offset numbering and no index: Write returns a
// ChunkPosition that the caller keeps (rosedb keeps them in its own memory
// index). So does this adapter: offset o is positions[o]; opening an
// existing log rebuilds positions with a full traversal, as rosedb does at
// startup. Batches use PendingWrites + WriteAll (one write(2) per batch);
// Sync fsyncs the active segment (rosedb itself fsyncs a segment when it
// rotates, even with Sync off). Sequential reads use SetIsStartupTraversal,
// rosedb's single-reader mode that reads each 32 KiB block once instead of
// once per record. No time lookup, no waiting for data.

func init() { Register("rosedb", openRosedb) }

type rosedbLog struct {
	w   *rw.WAL
	pos []*rw.ChunkPosition
}

func openRosedb(dir string, cfg Config) (Log, error) {
	o := rw.DefaultOptions
	o.DirPath = dir
	o.SegmentSize = cfg.SegmentBytes
	o.Sync = false
	w, err := rw.Open(o)
	if err != nil {
		return nil, err
	}
	l := &rosedbLog{w: w}
	if _, err := l.traverse(func(p *rw.ChunkPosition, _ []byte) { l.pos = append(l.pos, p) }); err != nil {
		w.Close()
		return nil, err
	}
	return l, nil
}

func (l *rosedbLog) Name() string { return "rosedb" }

func (l *rosedbLog) Append(batch [][]byte, _ []int64) error {
	if len(batch) == 1 {
		p, err := l.w.Write(batch[0])
		if err != nil {
			return err
		}
		l.pos = append(l.pos, p)
		return nil
	}
	for _, v := range batch {
		l.w.PendingWrites(v)
	}
	ps, err := l.w.WriteAll()
	if err != nil {
		return err
	}
	if len(ps) != len(batch) {
		return fmt.Errorf("%w: rosedb wrote %d of %d", ErrMismatch, len(ps), len(batch))
	}
	l.pos = append(l.pos, ps...)
	return nil
}

func (l *rosedbLog) Sync() error { return l.w.Sync() }

func (l *rosedbLog) LookupFirst(off int64) ([]byte, error) {
	if off < 0 || off >= int64(len(l.pos)) {
		return nil, fmt.Errorf("rosedb: offset %d out of range [0,%d)", off, len(l.pos))
	}
	return l.w.Read(l.pos[off])
}

func (l *rosedbLog) LookupTime(int64) (int64, error) { return 0, ErrUnsupported }

func (l *rosedbLog) ReadAll(fn func(v []byte)) (int, error) {
	return l.traverse(func(_ *rw.ChunkPosition, v []byte) { fn(v) })
}

func (l *rosedbLog) traverse(fn func(p *rw.ChunkPosition, v []byte)) (int, error) {
	l.w.SetIsStartupTraversal(true)
	defer l.w.SetIsStartupTraversal(false)
	r := l.w.NewReader()
	n := 0
	for {
		v, p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		fn(p, v)
		n++
	}
}

func (l *rosedbLog) Close() error { return l.w.Close() }
