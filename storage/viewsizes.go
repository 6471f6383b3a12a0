package storage

import (
	"sync"
	"sync/atomic"
)

// sizeRun is the final rendered sizes of consecutive segments of a
// partition in one format, as prefix sums: cum[k] is the rendered bytes of
// the segments numbered (segment.seq) first to first+k-1. It is never
// changed once published; a longer run replaces it.
//
// A view's size is then its first segment's rendering past its start, the
// run's sum over the segments after it, and the newest segment's own: the
// sealed segments between are not looked at again, however many there
// are (a stat of offset/N on a partition of thousands of segments).
type sizeRun struct {
	first uint64
	cum   []int64
	gen   uint64 // the topic's holes count it was summed in (see Topic.holes)
}

// count returns how many segments the run covers.
func (r *sizeRun) count() int { return len(r.cum) - 1 }

// sizeCache is a partition's sizeRun for each format. Views read it
// without a lock and publish what they sum (View.publishSizes).
type sizeCache struct {
	mu   sync.Mutex // serialises publish
	runs [numFormats]atomic.Pointer[sizeRun]
}

// run returns the run of format f, if it was summed in holes count gen.
func (c *sizeCache) run(f Format, gen uint64) *sizeRun {
	r := c.runs[f].Load()
	if r == nil || r.gen != gen {
		return nil
	}
	return r
}

// publish adds the final rendered sizes totals of the segments numbered
// first on, summed in holes count gen, to the run of format f: merged
// with it when the two touch, in its place when it is stale or apart and
// shorter. Segments numbered below oldest (gone to retention) are
// dropped.
func (c *sizeCache) publish(f Format, gen, oldest, first uint64, totals []int64) {
	if len(totals) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lo, hi := first, first+uint64(len(totals)) // [lo, hi)
	cur := c.runs[f].Load()
	touch := cur != nil && cur.gen == gen && cur.first <= hi && lo <= cur.first+uint64(cur.count())
	if touch {
		lo, hi = min(lo, cur.first), max(hi, cur.first+uint64(cur.count()))
	} else if cur != nil && cur.gen == gen && cur.count() >= len(totals) {
		return // a longer run apart from these: keep it
	}
	lo = max(lo, min(oldest, hi))
	each := make([]int64, hi-lo)
	if touch {
		for k := 0; k < cur.count(); k++ {
			if seq := cur.first + uint64(k); seq >= lo {
				each[seq-lo] = cur.cum[k+1] - cur.cum[k]
			}
		}
	}
	for k, t := range totals {
		if seq := first + uint64(k); seq >= lo {
			each[seq-lo] = t
		}
	}
	r := &sizeRun{first: lo, cum: make([]int64, len(each)+1), gen: gen}
	for k, t := range each {
		r.cum[k+1] = r.cum[k] + t
	}
	c.runs[f].Store(r)
}
