package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The timed loops of the append, lookup and mixed phases, shared with the
// bench/peers harness: how many calls run, when a phase stops, and what is
// added up. In the append and lookup phases the call measured is timed by
// the caller's function itself, around that call only, so that neither
// this loop nor a function call of its own is inside a measurement; the
// mixed phase's appender is timed here, around the call of appendBatch.

// Appends is what TimeBatches measured.
type Appends struct {
	Records int64         // records appended
	Lat     []int64       // the time of every call, in ns, in call order
	Elapsed time.Duration // their sum
}

// TimeBatches appends records [0, n) in calls of batch records (the last
// may be shorter), after a garbage collection, until all are appended, ctx
// is done (ctx.Err() is returned) or, when limit is positive, limit has
// passed since the first call. appendBatch appends the k records from off
// and returns the time of what it measures (the append, or the append and
// the sync), which it times itself: preparing the values is not part of it.
// An error of appendBatch stops the phase and is returned as it is.
func TimeBatches(ctx context.Context, n int64, batch int, limit time.Duration, appendBatch func(off int64, k int) (time.Duration, error)) (Appends, error) {
	a := Appends{Lat: make([]int64, 0, n/int64(batch)+1)}
	runtime.GC()
	start := time.Now()
	for a.Records < n {
		if err := ctx.Err(); err != nil {
			return a, err
		}
		k := int(min(int64(batch), n-a.Records))
		d, err := appendBatch(a.Records, k)
		if err != nil {
			return a, err
		}
		a.Elapsed += d
		a.Lat = append(a.Lat, int64(d))
		a.Records += int64(k)
		if limit > 0 && time.Since(start) >= limit {
			break
		}
	}
	return a, nil
}

// Lookups is what TimeLookups measured.
type Lookups struct {
	Lat          []int64       // the time of every call, in ns, in call order
	Elapsed      time.Duration // their sum
	Wrong        int64         // answers that check refused
	WrongExample string        // the first of them
}

// TimeLookups makes one lookup for each of keys, in order, after a garbage
// collection, until the keys run out, ctx is done (ctx.Err() is returned) or
// limit has passed since the first call. lookup makes the call and returns
// its answer and its time, which it measures itself, around that call only;
// check judges each answer, keys[i]'s, outside the timing. An error of
// lookup stops the phase and is returned as "WHAT KEY: error".
func TimeLookups[V any](ctx context.Context, what string, keys []int64, limit time.Duration,
	lookup func(key int64) (V, time.Duration, error), check func(i int, v V) error) (Lookups, error) {
	m := Lookups{Lat: make([]int64, 0, len(keys))}
	runtime.GC()
	start := time.Now()
	for i, key := range keys {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		v, d, err := lookup(key)
		if err != nil {
			return m, fmt.Errorf("%s %d: %w", what, key, err)
		}
		if err := check(i, v); err != nil {
			if m.Wrong == 0 {
				m.WrongExample = err.Error()
			}
			m.Wrong++
		}
		m.Elapsed += d
		m.Lat = append(m.Lat, int64(d))
		if time.Since(start) >= limit {
			break
		}
	}
	return m, nil
}

// Mixed is what TimeMixed measured.
type Mixed struct {
	Lat          []int64       // the time of every Append call, in ns, in call order
	Elapsed      time.Duration // from the followers' start to the end of the last Append call
	Lag          []int64       // the lag of every record at every follower, in ns
	ReadersDone  time.Duration // from the followers' start to the end of the last of them
	Wrong        int64         // wrong answers the followers noted
	WrongExample string        // the first follower's first
}

// A Follower is one reader of a mixed phase, as TimeMixed hands it to the
// follow function of a harness, which notes on it what it reads. It is used
// by that follow function alone.
type Follower struct {
	clock   *mixedClock
	lag     []int64
	done    time.Duration
	err     error
	wrong   int64
	example string
}

// mixedClock tells when the Append call of every batch started.
type mixedClock struct {
	t0       time.Time
	batch    int64
	appendAt []atomic.Int64 // ns since t0, +1 (0 = not yet)
}

// Got notes that the follower has the record at off, now: its lag is the
// time since the start of the Append call that wrote it. off is one of the
// records appended, [0, m): call Got once the record's offset is checked,
// before anything else is done with it.
func (f *Follower) Got(off int64) {
	now := int64(time.Since(f.clock.t0))
	if at := f.clock.appendAt[off/f.clock.batch].Load(); at > 0 {
		f.lag = append(f.lag, now-(at-1))
	}
}

// Wrong counts a wrong answer; the first one's example is kept.
func (f *Follower) Wrong(example string) {
	if f.wrong++; f.wrong == 1 {
		f.example = example
	}
}

// TimeMixed measures one appender while readers followers read: it starts
// a goroutine per follower, running follow from offset 0 until it has read
// records [0, m), and then appends records [0, m) in calls of batch records
// as fast as it can. prepare readies the k records from off, outside the
// time of a call; appendBatch appends them. An error of appendBatch cancels
// the followers' context and is returned once they have ended; otherwise
// the error of the first follower that failed is returned, if any.
func TimeMixed(ctx context.Context, m int64, batch, readers int, follow func(ctx context.Context, f *Follower) error,
	prepare func(off int64, k int), appendBatch func() error) (Mixed, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nb := (m + int64(batch) - 1) / int64(batch)
	clock := &mixedClock{batch: int64(batch), appendAt: make([]atomic.Int64, nb)}
	fs := make([]Follower, readers)
	var wg sync.WaitGroup
	clock.t0 = time.Now()
	for i := range fs {
		f := &fs[i]
		f.clock = clock
		wg.Go(func() {
			f.lag = make([]int64, 0, m)
			f.err = follow(ctx, f)
			f.done = time.Since(clock.t0)
		})
	}
	x := Mixed{Lat: make([]int64, 0, nb)}
	var off int64
	var appendErr error
	for bi := int64(0); off < m; bi++ {
		k := int(min(int64(batch), m-off))
		prepare(off, k)
		t := time.Now()
		clock.appendAt[bi].Store(int64(t.Sub(clock.t0)) + 1)
		if appendErr = appendBatch(); appendErr != nil {
			break
		}
		x.Lat = append(x.Lat, int64(time.Since(t)))
		off += int64(k)
	}
	x.Elapsed = time.Since(clock.t0)
	if appendErr != nil {
		cancel()
	}
	wg.Wait()
	if appendErr != nil {
		return x, appendErr
	}
	for _, f := range fs {
		if f.err != nil {
			return x, f.err
		}
		x.Lag = append(x.Lag, f.lag...)
		x.ReadersDone = max(x.ReadersDone, f.done)
		if f.wrong > 0 && x.Wrong == 0 {
			x.WrongExample = f.example
		}
		x.Wrong += f.wrong
	}
	return x, nil
}
