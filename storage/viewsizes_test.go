package storage

import (
	"fmt"
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
