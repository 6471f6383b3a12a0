package index

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// In these tests entry i (from 1) of an offset index is (base+2i, 10i), so
// every answer can be checked on its own: pos == 5*(off-base).

func TestLookupsDuringAppends(t *testing.T) {
	const base, n, readers = 1000, 20000, 4
	x := newOffsetIndex(t, base, n*OffsetEntrySize)
	y := newTimeIndex(t, base, (n+1)*TimeEntrySize)
	var published atomic.Int64 // entries known appended to both
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for {
				done := published.Load() == n
				known := published.Load() // entries that must be visible now
				target := base + r.Int64N(2*n+10)
				off, pos, err := x.Lookup(record.Offset(target))
				if err != nil {
					errs <- err
					return
				}
				rel := int64(off) - base
				switch {
				case pos != record.Position(5*rel):
					errs <- errors.New("offset lookup returned a torn entry")
					return
				case int64(off) > target:
					errs <- errors.New("offset lookup above the target")
					return
				case min(known, (target-base)/2)*2 > rel:
					errs <- errors.New("offset lookup missed a published entry")
					return
				}
				ts, toff, err := y.Lookup(target)
				if err != nil {
					errs <- err
					return
				}
				if ts >= 0 && (ts > target || int64(toff) != ts) || ts < 0 && toff != base {
					errs <- errors.New("time lookup returned a wrong entry")
					return
				}
				if c, err := x.Entries(); err != nil || int64(c) < known {
					errs <- errors.New("entry count went back")
					return
				}
				if done {
					return
				}
			}
		}()
	}
	for i := int64(1); i <= n; i++ {
		require.NoError(t, x.Append(record.Offset(base+2*i), record.Position(10*i)))
		require.NoError(t, y.MaybeAppend(base+2*i, record.Offset(base+2*i), false))
		published.Store(i)
		if i%5000 == 0 {
			require.NoError(t, x.Flush())
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestSealAndCloseDuringLookups(t *testing.T) {
	const n, readers = 3000, 4
	x := newOffsetIndex(t, 0, 0)
	fillOffsets(t, x, n, 2) // entry i: (2i, 100i)
	var wg sync.WaitGroup
	var closedSeen atomic.Int32
	var lookups atomic.Int64
	errs := make(chan error, readers)
	start := make(chan struct{})
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			<-start
			for {
				target := r.Int64N(2*n + 5)
				off, pos, err := x.Lookup(record.Offset(target))
				if errors.Is(err, ErrClosed) {
					closedSeen.Add(1)
					return
				}
				if err != nil {
					errs <- err
					return
				}
				if pos != record.Position(50*off) || int64(off) > target {
					errs <- errors.New("wrong entry")
					return
				}
				_ = x.IsFull()
				lookups.Add(1)
			}
		}()
	}
	close(start)
	waitLookups := func() {
		for want := lookups.Load() + 1000; lookups.Load() < want; {
			require.NoError(t, x.Flush())
		}
	}
	waitLookups() // on the writable mapping
	require.NoError(t, x.Seal())
	waitLookups() // on the read-only one
	require.NoError(t, x.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(readers), closedSeen.Load(), "every reader ends on ErrClosed")
}

func TestConcurrentFirstUse(t *testing.T) {
	// KAFKA-9156: many first users of a lazily opened index map it once
	// and agree on it.
	p := sealedOffsetFile(t, 50)
	for range 20 {
		x, err := OpenOffsetIndex(p, 0, Options{LogSize: -1})
		require.NoError(t, err)
		var wg sync.WaitGroup
		results := make([]record.Position, 8)
		for g := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, pos, err := x.Lookup(record.Offset(g + 1))
				if err == nil {
					results[g] = pos
				}
			}()
		}
		wg.Wait()
		for g, pos := range results {
			require.Equal(t, record.Position(100*(g+1)), pos)
		}
		require.True(t, x.Mapped())
		require.NoError(t, x.Close())
	}
}
