package peers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// logfs itself, through its storage API (package storage): one data
// directory with one topic of one partition, Kafka's layout (RecordBatch v2
// segments with sparse mmap'd .index and .timeindex). Driven as its own
// users drive it:
//   - segment.bytes is the run's segment size; flush.ms=-1 so that nothing
//     fsyncs behind the harness's back (logfs's own default fsyncs every
//     second); retention off. Like rosedb, a roll still fsyncs the sealed
//     segment (in the background), which is part of logfs's durability
//     promise and is left in;
//   - each Append is one Partition.Append: one RecordBatch, one pwrite;
//   - lookups are one Reader kept open and Seek'd (binary search over
//     segments, over the sparse index, walk of batch headers), then Next;
//   - time lookups are Partition.OffsetForTime (Kafka's offsetsForTimes);
//   - followers block in Reader.Wait at the log end: no polling.

func init() { Register(LogfsName, openLogfs) }

// logfsTopic is the topic every logfs data set holds.
const logfsTopic = "bench"

type logfsLog struct {
	l    *storage.Log
	p    *storage.Partition
	recs []storage.Record
	r    *storage.Reader // lookups, reused
}

func openLogfs(dir string, cfg Config) (Log, error) {
	l, err := storage.Open(dir, storage.Options{
		Logger:                 slog.New(slog.DiscardHandler),
		RetentionCheckInterval: -1,
	})
	if err != nil {
		return nil, err
	}
	p, err := l.Partition(logfsTopic, 0)
	if errors.Is(err, storage.ErrNoTopic) {
		var t *storage.Topic
		t, err = l.CreateTopic(logfsTopic, 1, storage.Overrides{
			"segment.bytes": cfg.SegmentBytes,
			"flush.ms":      -1,
			"retention.ms":  -1,
		})
		if err == nil {
			p, err = t.Partition(0)
		}
	}
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return &logfsLog{l: l, p: p}, nil
}

func (l *logfsLog) Name() string { return LogfsName }

func (l *logfsLog) Append(batch [][]byte, ts []int64) error {
	if cap(l.recs) < len(batch) {
		l.recs = make([]storage.Record, len(batch))
	}
	recs := l.recs[:len(batch)]
	for i, v := range batch {
		recs[i] = storage.Record{Timestamp: ts[i], Value: v}
	}
	want := l.p.EndOffset()
	first, err := l.p.Append(recs) // copies the values
	if err != nil {
		return err
	}
	if first != want {
		return fmt.Errorf("%w: logfs appended at %d, want %d", ErrMismatch, first, want)
	}
	return nil
}

func (l *logfsLog) Sync() error { return l.p.Sync() }

func (l *logfsLog) LookupFirst(off int64) ([]byte, error) {
	var err error
	if l.r == nil {
		l.r, err = l.p.NewReader(record.Offset(off))
	} else {
		err = l.r.Seek(record.Offset(off))
	}
	if err != nil {
		return nil, err
	}
	rec, err := l.r.Next()
	if err != nil {
		return nil, err
	}
	if int64(rec.Offset) != off {
		return nil, fmt.Errorf("%w: logfs read offset %d for %d", ErrMismatch, rec.Offset, off)
	}
	return rec.Value, nil
}

func (l *logfsLog) LookupTime(ts int64) (int64, error) {
	off, err := l.p.OffsetForTime(ts)
	return int64(off), err
}

func (l *logfsLog) ReadAll(fn func(v []byte)) (n int, err error) {
	r, err := l.p.NewReader(l.p.StartOffset())
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	for want := l.p.StartOffset(); ; want++ {
		rec, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if rec.Offset != want {
			return n, fmt.Errorf("%w: logfs read offset %d at %d", ErrMismatch, rec.Offset, want)
		}
		fn(rec.Value)
		n++
	}
}

// Follow reads with its own Reader and sleeps in Reader.Wait whenever it
// has caught up with the log end.
func (l *logfsLog) Follow(ctx context.Context, from int64, fn func(off int64, v []byte) bool) (err error) {
	r, err := l.p.NewReader(record.Offset(from))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	for want := record.Offset(from); ; {
		rec, err := r.Next()
		if err == io.EOF {
			if err := r.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if rec.Offset != want {
			return fmt.Errorf("%w: logfs followed offset %d, want %d", ErrMismatch, rec.Offset, want)
		}
		if !fn(int64(rec.Offset), rec.Value) {
			return nil
		}
		want++
	}
}

func (l *logfsLog) Close() error {
	var errs []error
	if l.r != nil {
		errs = append(errs, l.r.Close())
	}
	errs = append(errs, l.l.Close())
	return errors.Join(errs...)
}
