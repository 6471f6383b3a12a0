package storage

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
)

// A view's size on a partition of many segments is worked out from the
// sealed segments' sizes cached in the partition: once a view summed them,
// a view from any segment base (what `ls -l offset/` stats, one name after
// the other) works out only its own first segment's start and the newest
// segment, in both formats and isolations, and its size and reads match
// the sequential rendering, also after the log rolls on under a view.
func TestViewSizeFromCachedSegmentSizes(t *testing.T) {
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
		t.Run(fmt.Sprint(iso), func(t *testing.T) {
			l := openLog(t, t.TempDir(), Options{Isolation: iso})
			top, err := l.CreateTopic("t", 1, small("segment.bytes=250", "retention.bytes=-1", "retention.ms=-1"))
			require.NoError(t, err)
			p, _ := top.Partition(0)
			for i := 0; i < 200; i++ {
				_, err := p.Append(values(1+i%3, fmt.Sprintf("record-%d", i)))
				require.NoError(t, err)
			}
			segs := len(p.segments())
			require.Greater(t, segs, 40)
			rng := rand.New(rand.NewSource(1))
			for _, f := range []Format{Values, JSONL} {
				sizeOf := func(from record.Offset) int64 {
					v, err := p.NewView(f, from)
					require.NoError(t, err)
					defer v.Close()
					n, err := v.Size()
					require.NoError(t, err)
					return n
				}
				sizeOf(0) // sums every sealed segment once
				before := p.sized.Load()
				for _, b := range p.SegmentBases() {
					require.Equal(t, int64(len(renderAll(t, p, f, b))), sizeOf(b), "%v from %d", f, b)
				}
				// Each view: its newest segment, and its first one
				// when that is the newest.
				require.LessOrEqual(t, p.sized.Load()-before, int64(len(p.SegmentBases())),
					"%v: a view's size summed the sealed segments again", f)

				v, err := p.NewView(f, 3)
				require.NoError(t, err)
				checkReads(t, v, renderAll(t, p, f, 3), rng)
				_, err = p.Append(values(40, "more")) // rolls a few
				require.NoError(t, err)
				want := renderAll(t, p, f, 3)
				n, err := v.Size()
				require.NoError(t, err)
				require.Equal(t, int64(len(want)), n, "%v: grown", f)
				checkReads(t, v, want, rng)
				require.NoError(t, v.Close())
			}
			require.Greater(t, len(p.segments()), segs)
		})
	}
}

// A follower copy changes its segment list where the cached sizes do not
// look: eviction drops the oldest segments, growing backwards adds new
// ones below the first (numbered down from it, past zero, and onto the
// numbers of segments evicted before), and a reset starts again. After
// each, a view's size and reads from every segment base equal the
// sequential rendering, also for a view that pinned the segments before.
func TestViewSizeOfFetchedCopyAcrossEvictPrependReset(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{Gaps: true})
	top, err := l.CreateTopic("copy", 1, small("segment.bytes=200", "retention.bytes=-1", "retention.ms=-1"))
	require.NoError(t, err)
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(1))
	batches := func(from, to record.Offset, prefix string) [][]byte {
		var out [][]byte
		for off := from; off < to; off += 2 {
			out = append(out, leaderBatch(t, off, 2, prefix))
		}
		return out
	}
	check := func(step string) {
		t.Helper()
		for _, f := range []Format{Values, JSONL} {
			for pass := 0; pass < 2; pass++ { // the first sums and caches, the second uses it
				for _, b := range p.SegmentBases() {
					from := max(b, p.StartOffset())
					want := renderAll(t, p, f, from)
					n, _, err := p.ViewSize(f, from)
					require.NoError(t, err, "%s: %v from %d", step, f, from)
					require.Equal(t, int64(len(want)), n, "%s: %v size from %d", step, f, from)
					v, err := p.NewView(f, from)
					require.NoError(t, err)
					buf := make([]byte, len(want)+60)
					k := 0
					for {
						n, err := v.ReadAt(buf[k:], int64(k))
						k += n
						if errors.Is(err, io.EOF) || n == 0 {
							break
						}
						require.NoError(t, err, "%s: %v read from %d", step, f, from)
					}
					require.Equal(t, string(want), string(buf[:k]), "%s: %v read from %d", step, f, from)
					if len(want) > 0 {
						at := rng.Int63n(int64(len(want)))
						k, _ = v.ReadAt(buf[:50], at)
						require.Equal(t, string(want[at:min(at+50, int64(len(want)))]), string(buf[:k]), "%s: %v from %d read at %d", step, f, from, at)
					}
					require.NoError(t, v.Close())
				}
			}
		}
	}

	require.NoError(t, p.ResetFetched(40, batches(40, 80, "a")))
	require.Greater(t, len(p.SegmentBases()), 4)
	check("copied")
	// Segments below the first, numbered down past zero.
	pp, err := p.BeginPrepend(20)
	require.NoError(t, err)
	require.NoError(t, pp.Append(batches(20, 40, "bb")))
	require.NoError(t, pp.Commit())
	check("grown backwards")
	old, err := p.NewView(Values, p.StartOffset())
	require.NoError(t, err)
	defer old.Close()
	oldWant := renderAll(t, p, Values, p.StartOffset())
	n, err := old.Size() // pins every segment
	require.NoError(t, err)
	require.Equal(t, int64(len(oldWant)), n)

	// Evict the oldest, then grow backwards again with records rendered
	// longer: the new segments take the numbers of the evicted ones.
	_, err = p.AdvanceStart(50)
	require.NoError(t, err)
	check("evicted")
	pp, err = p.BeginPrepend(22)
	require.NoError(t, err)
	require.NoError(t, pp.Append(batches(22, pp.Limit(), "cccccccc")))
	require.NoError(t, pp.Commit())
	check("evicted and grown backwards")
	n, err = old.Size()
	require.NoError(t, err)
	require.Equal(t, int64(len(oldWant)), n, "a view pinned before")
	buf := make([]byte, len(oldWant)+10)
	k, err := old.ReadAt(buf, 0)
	require.Equal(t, string(oldWant), string(buf[:k]), "a view pinned before: %v", err)
	checkReads(t, old, oldWant, rng)

	// A reset, then growing backwards onto the old copy's numbers.
	require.NoError(t, p.ResetFetched(200, batches(200, 230, "d")))
	check("reset")
	pp, err = p.BeginPrepend(150)
	require.NoError(t, err)
	require.NoError(t, pp.Append(batches(150, pp.Limit(), "eeeeee")))
	require.NoError(t, pp.Commit())
	check("reset and grown backwards")
	require.NoError(t, l.Check())
}
