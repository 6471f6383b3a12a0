package record

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Adversarial tests of AppendValues and SkipValues used as storage's
// renderValues uses them while it marks a batch (cc8338b): rendering with
// AppendValues into a buffer cut short at the next mark's place, counting
// with SkipValues once a record did not fit, and Next for the record a
// mark falls on. What they make, marks included, must be what a loop of
// Next alone makes.

// markSim is storage's marker in small: a mark at the first record to
// start step rendered bytes or more after the last mark.
type markSim struct {
	at, last, step int64
	marks          [][3]int64 // index, off, at
}

func newMarkSim(step int64) markSim { return markSim{last: -step, step: step} }

func (m *markSim) note(off int, index int32, size int64) {
	if m.at-m.last >= m.step {
		m.marks = append(m.marks, [3]int64{int64(index), int64(off), m.at})
		m.last = m.at
	}
	m.at += size
}

func (m *markSim) unmarked() int64 { return max(m.last+m.step-m.at, 0) }
func (m *markSim) skip(n int64)    { m.at += n }

// markRender is what a marking render made: the rendering and where it
// stopped (valuesRender; rest is the first record that did not fit), the
// marks, the rendered size counted, and where the cut was.
type markRender struct {
	valuesRender
	marks    [][3]int64
	to       int64
	cutIndex int32
	cutOff   int
}

// renderMarking is storage's renderValues for a batch it marks: with fast,
// as it is now (AppendValues up to the next mark's place, SkipValues after
// the cut, Next and note for the records in between); without, as it was
// before AppendValues: Next and note for every record. After the first
// record that does not fit, the rest are only counted.
func renderMarking(it RecordIter, dst []byte, step int64, fast bool) markRender {
	r := markRender{cutIndex: -1}
	m := newMarkSim(step)
	n, spilled := 0, false
	for {
		switch {
		case !fast:
		case r.cutIndex >= 0:
			m.skip(it.SkipValues(m.unmarked()))
		case spilled:
		default:
			lim := min(int64(len(dst)), int64(n)+m.unmarked())
			k := it.AppendValues(dst[:lim], n)
			m.skip(int64(k - n))
			n = k
		}
		off, index := it.Off(), it.Index()
		if !it.Next() {
			break
		}
		rec := it.Record()
		m.note(off, index, int64(len(rec.Value))+1)
		if r.cutIndex >= 0 {
			continue
		}
		if spilled || n+len(rec.Value)+1 > len(dst) {
			spilled = true
			r.spill(rec.Value)
			if it.Index() < it.h.RecordCount {
				r.cutIndex, r.cutOff = it.Index(), it.Off()
			}
			continue
		}
		n += copy(dst[n:], rec.Value)
		dst[n] = '\n'
		n++
	}
	r.dst, r.n = dst[:n], n
	r.valuesRender = r.stopped(&it)
	r.marks, r.to = m.marks, m.at
	return r
}

func (r markRender) diff(o markRender) string {
	if d := r.valuesRender.diff(o.valuesRender); d != "" {
		return d
	}
	switch {
	case !slices.Equal(r.marks, o.marks):
		return fmt.Sprintf("marks %v, want %v", r.marks, o.marks)
	case r.to != o.to:
		return fmt.Sprintf("counted %d rendered bytes, want %d", r.to, o.to)
	case r.cutIndex != o.cutIndex || r.cutOff != o.cutOff:
		return fmt.Sprintf("cut at record %d, byte %d; want %d, %d", r.cutIndex, r.cutOff, o.cutIndex, o.cutOff)
	}
	return ""
}

// sameMarkingRender fails unless renderMarking makes the same with fast
// as without, for mark steps that fall on records' ends and a byte either
// side, and buffers of every size that matters.
func sameMarkingRender(t *testing.T, it RecordIter, what string, rng *rand.Rand) {
	t.Helper()
	sizes := renderSizes(it, rng)
	steps := []int64{1, 2, 3, 100, 101, 1024, 16 << 10}
	extra := 4
	if len(sizes) > 40 {
		steps, extra = []int64{101, 16 << 10}, 1 // a long batch: fewer
	}
	if len(sizes) > 4 {
		for k := 0; k < extra; k++ {
			steps = append(steps, int64(sizes[3+rng.IntN(len(sizes)-3)]))
		}
	}
	a, b := make([]byte, slices.Max(sizes)), make([]byte, slices.Max(sizes))
	for _, step := range steps {
		if step <= 0 {
			continue
		}
		for i, size := range sizes {
			// A long batch: its first and last sizes and a few between.
			if len(sizes) > 40 && i >= 6 && i < len(sizes)-4 && rng.IntN(len(sizes)) >= 3 {
				continue
			}
			want := renderMarking(it, b[:size], step, false)
			if d := renderMarking(it, a[:size], step, true).diff(want); d != "" {
				t.Fatalf("%s, marks every %d, %d-byte buffer: %s", what, step, size, d)
			}
		}
	}
}

// Rendering while marking, with AppendValues and SkipValues, gives what
// Next alone gives: the bytes, the record that did not fit, the cut after
// it, the marks, where the iterator stopped and its error; on the seed
// batches, damaged ones and RecordsIn cuts from records on, the cut right
// after a run of common records, and on made records of every edge.
func TestMarkingRenderAsNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	counts := func(records int32) (int, int) {
		if records > 1000 {
			return 1, 3
		}
		return 40, 40
	}
	eachSeedIterator(t, rng, counts, func(it RecordIter, what string) { sameMarkingRender(t, it, what, rng) })
	for round := 0; round < 150; round++ {
		h, data := madeBatch(rng)
		sameMarkingRender(t, RecordIter{h: h, data: data}, fmt.Sprintf("made round %d", round), rng)
		cut := rng.IntN(len(data) + 1)
		sameMarkingRender(t, RecordsIn(&h, 0, data[:cut:cut], 0), fmt.Sprintf("made round %d cut at %d", round, cut), rng)
	}
}

// SkipValues and AppendValues, called in turn with limits that fall on
// records' ends and a byte either side, then Next, pass over exactly the
// records Next would render, and stop where it would; AppendValues
// never writes past the buffer it is given (the bytes after it are
// left as they were).
func TestSkipAndAppendInTurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	var dec Decoder
	for s, raw := range decodeSeeds(t) {
		b, err := ParseBatch(raw, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The values Next renders, one by one.
		var sizes []int64
		var want []byte
		for it, _ := dec.Records(&b); it.Next(); {
			sizes = append(sizes, int64(len(it.Record().Value))+1)
			want = append(append(want, it.Record().Value...), '\n')
		}
		rounds := 200
		if len(sizes) > 1000 {
			rounds = 10
		}
		for round := 0; round < rounds; round++ {
			it, _ := dec.Records(&b)
			var got []byte
			buf := make([]byte, 0, 1<<20)
			k := 0 // the records passed
			for k < len(sizes) {
				// A limit around the end of one of the next few records.
				var end int64
				j := k + rng.IntN(min(len(sizes)-k, 50))
				for _, sz := range sizes[k : j+1] {
					end += sz
				}
				limit := max(end+int64(rng.IntN(3))-1, 0)
				var adv int64
				if rng.IntN(2) == 0 {
					adv = it.SkipValues(limit)
					got = append(got, want[int64(len(got)):int64(len(got))+adv]...)
				} else {
					dst := buf[:min(int(limit)+8, cap(buf))]
					for i := range dst {
						dst[i] = 0xA5
					}
					n := it.AppendValues(dst[:limit], 0)
					for i := int(limit); i < len(dst); i++ {
						if dst[i] != 0xA5 {
							t.Fatalf("seed %d round %d: AppendValues wrote byte %d of a %d-byte buffer", s, round, i, limit)
						}
					}
					got = append(got, dst[:n]...)
					adv = int64(n)
				}
				// What Next alone would take in limit.
				var fit int64
				m := k
				for m < len(sizes) && fit+sizes[m] <= limit {
					fit += sizes[m]
					m++
				}
				if adv > fit {
					t.Fatalf("seed %d round %d: passed %d bytes from record %d in a limit of %d, at most %d fit", s, round, adv, k, limit, fit)
				}
				for adv > 0 {
					adv -= sizes[k]
					k++
				}
				if adv != 0 || it.Index() != int32(k) {
					t.Fatalf("seed %d round %d: stopped inside a record, or at record %d for %d", s, round, it.Index(), k)
				}
				if k < len(sizes) && rng.IntN(3) == 0 {
					if !it.Next() {
						t.Fatalf("seed %d round %d: Next stopped at record %d: %v", s, round, k, it.Err())
					}
					got = append(append(got, it.Record().Value...), '\n')
					k++
				}
			}
			if it.Next() || it.Err() != nil {
				t.Fatalf("seed %d round %d: at the end, Next %v", s, round, it.Err())
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d round %d: rendered %d bytes unlike Next's %d", s, round, len(got), len(want))
			}
		}
	}
}
