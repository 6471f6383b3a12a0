package peers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	lb "github.com/liftbridge-io/liftbridge/server/commitlog"
)

// liftbridge v1.9.0 server/commitlog: Kafka-shaped segments (%020d.log) with
// a dense, mmap'd 20-byte index entry per message that carries the timestamp,
// so offset and time lookups share one file. Driven as the peer survey (A.7)
// says:
//   - timestamps are ours (ts passed to Append, milliseconds; liftbridge
//     itself uses nanoseconds but only ever compares them), monotonic;
//   - readers are uncommitted readers (no high watermark waits), which block
//     at the end of the log: reads are bounded by NewestOffset()+1 and use a
//     context that Close cancels;
//   - it has no Sync: ours fsyncs, through our own descriptors, the .log and
//     .index of every segment written since the previous Sync (its index is
//     not rebuilt on open in v1.9.0, so both must be durable).

func init() { Register("liftbridge", openLiftbridge) }

type liftbridgeLog struct {
	dir    string
	cl     lb.CommitLog
	ctx    context.Context
	cancel context.CancelFunc

	msgs  []*lb.Message
	store []lb.Message
	hdr   []byte

	synced  map[string]*os.File // segment files opened for fsync
	newestS int64               // base offset of the newest segment synced
}

func openLiftbridge(dir string, cfg Config) (Log, error) {
	cl, err := lb.New(lb.Options{
		Path:            dir,
		MaxSegmentBytes: cfg.SegmentBytes,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &liftbridgeLog{
		dir: dir, cl: cl, ctx: ctx, cancel: cancel,
		hdr:    make([]byte, 28),
		synced: map[string]*os.File{},
	}, nil
}

func (l *liftbridgeLog) Name() string { return "liftbridge" }

func (l *liftbridgeLog) Append(batch [][]byte, ts []int64) error {
	if cap(l.store) < len(batch) {
		l.store = make([]lb.Message, len(batch))
		l.msgs = make([]*lb.Message, len(batch))
	}
	l.store, l.msgs = l.store[:len(batch)], l.msgs[:len(batch)]
	for i, v := range batch {
		l.store[i] = lb.Message{Value: v, Timestamp: ts[i]}
		l.msgs[i] = &l.store[i]
	}
	want := l.cl.NewestOffset() + 1
	offs, err := l.cl.Append(l.msgs)
	if err != nil {
		return err
	}
	if len(offs) != len(batch) || offs[0] != want {
		return fmt.Errorf("%w: liftbridge appended at %v, want %d", ErrMismatch, offs, want)
	}
	return nil
}

func (l *liftbridgeLog) Sync() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	newest := l.newestS
	for _, e := range ents {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != ".log" && ext != ".index" {
			continue
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil || base < l.newestS {
			continue // not a segment, or sealed and synced before
		}
		f := l.synced[name]
		if f == nil {
			if f, err = os.Open(filepath.Join(l.dir, name)); err != nil {
				return err
			}
			l.synced[name] = f
		}
		if err := f.Sync(); err != nil {
			return err
		}
		newest = max(newest, base)
	}
	l.newestS = newest
	return nil
}

func (l *liftbridgeLog) LookupFirst(off int64) ([]byte, error) {
	if newest := l.cl.NewestOffset(); off < 0 || off > newest {
		// The uncommitted reader would block waiting for it.
		return nil, fmt.Errorf("liftbridge: offset %d out of range [0,%d]", off, newest)
	}
	r, err := l.cl.NewReader(off, true)
	if err != nil {
		return nil, err
	}
	msg, got, _, _, err := r.ReadMessage(l.ctx, l.hdr)
	if err != nil {
		return nil, err
	}
	if got != off {
		return nil, fmt.Errorf("%w: liftbridge read offset %d for %d", ErrMismatch, got, off)
	}
	return msg.Value(), nil
}

func (l *liftbridgeLog) LookupTime(ts int64) (int64, error) {
	return l.cl.EarliestOffsetAfterTimestamp(ts)
}

func (l *liftbridgeLog) ReadAll(fn func(v []byte)) (int, error) {
	n := l.cl.NewestOffset() + 1
	if n == 0 {
		return 0, nil
	}
	r, err := l.cl.NewReader(0, true)
	if err != nil {
		return 0, err
	}
	for i := int64(0); i < n; i++ {
		msg, got, _, _, err := r.ReadMessage(l.ctx, l.hdr)
		if err != nil {
			return int(i), err
		}
		if got != i {
			return int(i), fmt.Errorf("%w: liftbridge read offset %d at %d", ErrMismatch, got, i)
		}
		fn(msg.Value())
	}
	return int(n), nil
}

// Follow uses an uncommitted reader, which waits on the segment's waiter
// channels at the end of the log. A reader cannot be created at the log end
// offset (NewReader says "segment not found"), so a follower that starts
// there first waits with NotifyLEO, as liftbridge's replicator does.
func (l *liftbridgeLog) Follow(ctx context.Context, from int64, fn func(off int64, v []byte) bool) error {
	waiter := new(byte) // identity for NotifyLEO
	for {
		leo := l.cl.NewestOffset()
		if from <= leo {
			break
		}
		select {
		case <-l.cl.NotifyLEO(waiter, leo):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r, err := l.cl.NewReader(from, true)
	if err != nil {
		return err
	}
	hdr := make([]byte, 28)
	for want := from; ; want++ {
		msg, got, _, _, err := r.ReadMessage(ctx, hdr)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if got != want {
			return fmt.Errorf("%w: liftbridge followed offset %d, want %d", ErrMismatch, got, want)
		}
		if !fn(got, msg.Value()) {
			return nil
		}
	}
}

func (l *liftbridgeLog) Close() error {
	l.cancel()
	var errs []error
	for _, f := range l.synced {
		errs = append(errs, f.Close())
	}
	errs = append(errs, l.cl.Close())
	return errors.Join(errs...)
}
