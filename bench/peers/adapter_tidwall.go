package peers

import (
	"fmt"

	tw "github.com/tidwall/wal"
)

// tidwall/wal v1.2.1: segments of uvarint-framed entries, no index on disk;
// a segment's entry positions are computed in RAM when the whole segment is
// read (the tail segment on open, the others on first access, kept in an LRU
// of SegmentCacheSize = 2 segments). Indexes are 1-based and contiguous:
// offset o is index o+1. Options as the peer survey (A.7): defaults with
// NoSync (we fsync explicitly with Sync) and NoCopy (Read returns a slice of
// the cached segment); SegmentSize is the run's segment size. No time
// lookup, no waiting for data.

func init() { Register("tidwall", openTidwall) }

type tidwallLog struct {
	w    *tw.Log
	next uint64 // index of the next entry
	b    tw.Batch
}

func openTidwall(dir string, cfg Config) (Log, error) {
	o := *tw.DefaultOptions
	o.NoSync = true
	o.NoCopy = true
	o.SegmentSize = int(cfg.SegmentBytes)
	w, err := tw.Open(dir, &o)
	if err != nil {
		return nil, err
	}
	last, err := w.LastIndex()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &tidwallLog{w: w, next: last + 1}, nil
}

func (l *tidwallLog) Name() string { return "tidwall" }

func (l *tidwallLog) Append(batch [][]byte, _ []int64) error {
	for i, v := range batch {
		l.b.Write(l.next+uint64(i), v)
	}
	if err := l.w.WriteBatch(&l.b); err != nil {
		l.b.Clear()
		return err
	}
	l.next += uint64(len(batch))
	return nil
}

func (l *tidwallLog) Sync() error { return l.w.Sync() }

func (l *tidwallLog) LookupFirst(off int64) ([]byte, error) {
	return l.w.Read(uint64(off) + 1)
}

func (l *tidwallLog) LookupTime(int64) (int64, error) { return 0, ErrUnsupported }

func (l *tidwallLog) ReadAll(fn func(v []byte)) (int, error) {
	first, err := l.w.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := l.w.LastIndex()
	if err != nil {
		return 0, err
	}
	if first == 0 { // empty
		return 0, nil
	}
	if first != 1 {
		return 0, fmt.Errorf("%w: tidwall first index %d", ErrMismatch, first)
	}
	n := 0
	for i := first; i <= last; i++ {
		v, err := l.w.Read(i)
		if err != nil {
			return n, err
		}
		fn(v)
		n++
	}
	return n, nil
}

func (l *tidwallLog) Close() error { return l.w.Close() }
