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
//
// Sequence numbers are compared only as distances from first, modulo
// 2^64: a follower copy that grows backwards numbers its new segments
// down from its first one, past zero (Prepend.Commit).
//
// A number names one segment only within a layout (segment.layout): a
// copy that grows backwards or is reset gives numbers of segments it
// dropped to new ones, so a run holds the sizes of one layout, and a view
// uses and publishes only the run of its first segment's layout.
type sizeRun struct {
	first  uint64
	cum    []int64
	gen    uint64 // the topic's holes count it was summed in (see Topic.holes)
	layout uint64 // the layout of the segments it numbers (segment.layout)
}

// count returns how many segments the run covers.
func (r *sizeRun) count() int { return len(r.cum) - 1 }

// at returns where segment number seq is in the run, counted from first,
// and whether that is at most count (cum[at] is then the rendered bytes
// of the run's segments before it).
func (r *sizeRun) at(seq uint64) (uint64, bool) {
	d := seq - r.first
	return d, d <= uint64(r.count())
}

// maxLayouts is how many runs of different layouts a format keeps: views
// of a copy that grew backwards start in the layout of the prepended
// segments or in the one of those above them, and each kind would
// otherwise replace the other's run.
const maxLayouts = 4

// sizeCache is a partition's sizeRuns for each format, newest published
// first, one per layout. Views read it without a lock and publish what
// they sum (View.publishSizes).
type sizeCache struct {
	mu   sync.Mutex // serialises publish
	runs [numFormats]atomic.Pointer[[]*sizeRun]
}

// run returns the run of format f of the given layout, if it was summed in
// holes count gen.
func (c *sizeCache) run(f Format, gen, layout uint64) *sizeRun {
	rs := c.runs[f].Load()
	if rs == nil {
		return nil
	}
	for _, r := range *rs {
		if r.layout == layout {
			if r.gen != gen {
				return nil
			}
			return r
		}
	}
	return nil
}

// publish adds the final rendered sizes totals of the segments numbered
// first on, of the given layout, summed in holes count gen, to the run of
// format f and that layout: merged with it when the two touch, in its
// place when it is stale or apart and shorter. Segments numbered below
// oldest (gone to retention) are dropped.
func (c *sizeCache) publish(f Format, gen, layout, oldest, first uint64, totals []int64) {
	if len(totals) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var cur *sizeRun
	var others []*sizeRun
	if rs := c.runs[f].Load(); rs != nil {
		for _, r := range *rs {
			switch {
			case r.layout == layout:
				cur = r
			case r.gen == gen:
				others = append(others, r) // stale ones go
			}
		}
	}
	// Positions counted from first, signed: cur may start below it.
	lo, hi := int64(0), int64(len(totals)) // [lo, hi)
	var curLo, curHi int64
	touch := false
	if cur != nil && cur.gen == gen {
		curLo = int64(cur.first - first)
		curHi = curLo + int64(cur.count())
		touch = curLo <= hi && lo <= curHi
		if touch {
			lo, hi = min(lo, curLo), max(hi, curHi)
		} else if cur.count() >= len(totals) {
			return // a longer run apart from these: keep it
		}
	}
	lo = max(lo, min(min(int64(oldest-first), 0), hi))
	each := make([]int64, hi-lo)
	if touch {
		for k := int64(0); k < int64(cur.count()); k++ {
			if pos := curLo + k; pos >= lo {
				each[pos-lo] = cur.cum[k+1] - cur.cum[k]
			}
		}
	}
	for k, t := range totals {
		if pos := int64(k); pos >= lo {
			each[pos-lo] = t
		}
	}
	r := &sizeRun{first: first + uint64(lo), cum: make([]int64, len(each)+1), gen: gen, layout: layout}
	for k, t := range each {
		r.cum[k+1] = r.cum[k] + t
	}
	rs := append([]*sizeRun{r}, others[:min(len(others), maxLayouts-1)]...)
	c.runs[f].Store(&rs)
}
