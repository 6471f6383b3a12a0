package recovery_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/storage"
	"github.com/logfs/logfs/vfs"
)

// How a corruption case reopens the data directory.
type shutdown int

const (
	// clean keeps .kafka_cleanshutdown: nothing is scanned.
	clean shutdown = iota
	// unclean removes the marker and keeps the checkpoints: the segment
	// holding the recovery point (the log end, here the last segment) is
	// scanned, the older ones are not.
	unclean
	// scanAll removes the marker and the recovery-point checkpoint: every
	// segment is scanned, as after a crash before the first checkpoint.
	scanAll
)

func (s shutdown) String() string { return [...]string{"clean", "unclean", "scanAll"}[s] }

// corruptWant is the documented outcome of a corruption case (see the
// table in doc.go).
type corruptWant struct {
	start, end record.Offset // log start and end offsets after loading
	cutSeg     int           // segment cut at cutAt, or -1
	cutAt      record.Position
	dropped    []int    // segments dropped
	removed    []string // files removed as leftovers, by name
	rebuilt    []int    // segments whose missing indexes are rebuilt at load
	expired    []int    // segments removed as below the log start
	// badAt, when set, is a corruption left in place below the recovery
	// point: reads from the start return the records before badOffset and
	// then a *record.CorruptError at (badSeg, badAt); Check fails; a forced
	// recovery (`logfs check --repair`) cuts there and drops what follows.
	badOffset record.Offset
	badSeg    int
	badAt     record.Position
	// sameFiles must hold their original bytes once loading and a Check
	// are done: index files that were rebuilt.
	sameFiles []string
	// keptFiles must hold the bytes the damage left: index files that are
	// valid as they are (a zero tail ends the entries) and never rewritten.
	keptFiles []string
	// custom replaces the read-back check for damage that moves records.
	custom func(t *testing.T, b *built, p *storage.Partition)
	// hole says the damage leaves offsets missing, which Check reports in
	// a partition logfs wrote (it never compacts).
	hole bool
	// roEnd, when not zero, is the log end a read-only open shows (it
	// starts no segment), and roReadBack what it reads back.
	roEnd      record.Offset
	roReadBack func(t *testing.T, b *built, p *storage.Partition)
}

type corruptCase struct {
	shutdown shutdown
	damage   func(t *testing.T, b *built)
	want     func(b *built) corruptWant
}

// The header fields of a batch, as byte ranges (see package record).
var headerFields = map[string][2]int{
	"base offset":     {0, 8},
	"length":          {8, 12},
	"leader epoch":    {12, 16},
	"magic":           {16, 17},
	"crc":             {17, 21},
	"attributes":      {21, 23},
	"last offset δ":   {23, 27},
	"base timestamp":  {27, 35},
	"max timestamp":   {35, 43},
	"producer id":     {43, 51},
	"producer epoch":  {51, 53},
	"base sequence":   {53, 57},
	"record count":    {57, 61},
	"payload (first)": {61, 62},
}

func flip(t *testing.T, path string, at int64, mask byte) {
	t.Helper()
	b := readFile(t, path)
	b[at] ^= mask
	writeFile(t, path, b)
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	require.NoError(t, os.Truncate(path, size))
}

func appendBytes(t *testing.T, path string, extra []byte) {
	t.Helper()
	writeFile(t, path, append(readFile(t, path), extra...))
}

// cutLast is the outcome of damage to the last batch of the last segment:
// it is cut, everything before stays.
func cutLast(b *built) corruptWant {
	lb := b.lastBatch(b.last())
	return corruptWant{end: lb.base, cutSeg: b.last(), cutAt: lb.pos}
}

func intact(b *built) corruptWant { return corruptWant{end: b.end, cutSeg: -1} }

// lostDurableEnd is the outcome of damage that takes the end of the last
// segment below the recovery point (an unclean open keeps the checkpoint,
// which is the log end): the cut offsets were durable, so the log goes on
// at the recovery point from a new segment, and they are a hole that the
// read reaching it reports.
func lostDurableEnd(b *built, w corruptWant) corruptWant {
	lost := w.end
	w.end = b.end
	w.hole = true
	// A read-only open shows the log the writable one makes, the empty
	// segment at the recovery point included.
	w.roEnd = b.end
	w.roReadBack = func(t *testing.T, b *built, p *storage.Partition) {
		offs, err := readRecords(t, p)
		require.ErrorIs(t, err, storage.ErrHole)
		requireContiguous(t, offs, w.start, lost)
	}
	w.custom = func(t *testing.T, b *built, p *storage.Partition) {
		offs, err := readRecords(t, p)
		require.ErrorIs(t, err, storage.ErrHole)
		requireContiguous(t, offs, w.start, lost)
		off, err := p.Append([]storage.Record{{Value: []byte("after")}})
		require.NoError(t, err)
		require.Equal(t, b.end, off, "no offset is handed out twice")
	}
	return w
}

// corruptionCases are keyed by name; ref is a partition built the same way
// as the ones the cases damage.
func corruptionCases(ref *built) map[string]corruptCase {
	cases := map[string]corruptCase{}

	// Torn tails: the last batch cut at every byte.
	for k := 0; k < int(ref.lastBatch(ref.last()).size); k++ {
		cases[fmt.Sprintf("last batch truncated to %03d bytes", k)] = corruptCase{
			shutdown: unclean,
			damage: func(t *testing.T, b *built) {
				lb := b.lastBatch(b.last())
				truncateFile(t, b.path(b.last(), layout.LogSuffix), int64(lb.pos)+int64(k))
			},
			want: func(b *built) corruptWant {
				if k == 0 {
					// A whole batch below the recovery point gone: no cut,
					// but its offsets were durable.
					return lostDurableEnd(b, corruptWant{end: b.lastBatch(b.last()).base, cutSeg: -1})
				}
				return cutLast(b)
			},
		}
	}

	// One bit of each header field, and of the payload, of the last batch.
	for name, r := range headerFields {
		name, r := name, r
		c := corruptCase{
			shutdown: unclean,
			damage: func(t *testing.T, b *built) {
				lb := b.lastBatch(b.last())
				mask := byte(0x01)
				if name == "base offset" || name == "length" {
					mask = 0x80 // the high bit: a negative value, so detectable
				}
				flip(t, b.path(b.last(), layout.LogSuffix), int64(lb.pos)+int64(r[1]-1), mask)
			},
			want: cutLast,
		}
		switch name {
		case "leader epoch":
			// Not covered by the CRC and not used by logfs: undetectable
			// and harmless.
			c.want = intact
		case "base offset", "length":
			c.damage = func(t *testing.T, b *built) {
				lb := b.lastBatch(b.last())
				flip(t, b.path(b.last(), layout.LogSuffix), int64(lb.pos)+int64(r[0]), 0x80)
			}
		}
		cases["last batch: flipped bit in "+name] = c
	}
	cases["last batch: base offset lowered below the previous batch"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			lb := b.lastBatch(b.last()) // base 59: 59^2 = 57
			flip(t, b.path(b.last(), layout.LogSuffix), int64(lb.pos)+7, 0x02)
		},
		want: cutLast,
	}
	cases["last batch: base offset raised (undetectable)"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			lb := b.lastBatch(b.last()) // base 59: 59^4 = 63
			flip(t, b.path(b.last(), layout.LogSuffix), int64(lb.pos)+7, 0x04)
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			lb := b.lastBatch(b.last())
			raised := lb.base ^ 4
			w.end = raised + 1
			w.hole = true
			w.custom = func(t *testing.T, b *built, p *storage.Partition) {
				// The CRC does not cover the base offset. Kafka allows
				// gaps, but this partition is logfs's own (no
				// meta.properties): the gap is a hole, and the read that
				// reaches it fails rather than skip it.
				r, err := p.NewReader(lb.base - 1)
				require.NoError(t, err)
				defer r.Close()
				rec, err := r.Next()
				require.NoError(t, err)
				require.Equal(t, lb.base-1, rec.Offset)
				_, err = r.Next()
				require.ErrorIs(t, err, storage.ErrHole)
				r2, err := p.NewReader(raised)
				require.NoError(t, err)
				defer r2.Close()
				rec, err = r2.Next()
				require.NoError(t, err)
				require.Equal(t, raised, rec.Offset)
				require.Equal(t, value(lb.base), string(rec.Value))
			}
			return w
		},
	}
	cases["last batch: flipped bit in the middle of the payload"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			lb := b.lastBatch(b.last())
			flip(t, b.path(b.last(), layout.LogSuffix), int64(lb.pos)+lb.size/2+30, 0x10)
		},
		want: cutLast,
	}
	// With no recovery point nothing is known durable: damage in the
	// active segment is a torn tail, cut with what follows. (Below a
	// recovery point the bad batch alone is cut out: storage's
	// salvage tests.)
	cases["middle batch of the last segment: flipped crc bit"] = corruptCase{
		shutdown: scanAll,
		damage: func(t *testing.T, b *built) {
			bt := b.segs[b.last()].batches[1]
			flip(t, b.path(b.last(), layout.LogSuffix), int64(bt.pos)+20, 0x01)
		},
		want: func(b *built) corruptWant {
			bt := b.segs[b.last()].batches[1]
			return corruptWant{end: bt.base, cutSeg: b.last(), cutAt: bt.pos}
		},
	}
	cases["middle segment, no checkpoint: flipped payload bit"] = corruptCase{
		shutdown: scanAll,
		damage: func(t *testing.T, b *built) {
			bt := b.segs[1].batches[6]
			flip(t, b.path(1, layout.LogSuffix), int64(bt.pos)+70, 0x40)
		},
		want: func(b *built) corruptWant {
			bt := b.segs[1].batches[6]
			return corruptWant{end: bt.base, cutSeg: 1, cutAt: bt.pos, dropped: []int{2, 3}}
		},
	}
	cases["middle segment, no checkpoint: truncated inside a batch"] = corruptCase{
		shutdown: scanAll,
		damage: func(t *testing.T, b *built) {
			bt := b.segs[1].batches[6]
			truncateFile(t, b.path(1, layout.LogSuffix), int64(bt.pos)+33)
		},
		want: func(b *built) corruptWant {
			bt := b.segs[1].batches[6]
			return corruptWant{end: bt.base, cutSeg: 1, cutAt: bt.pos, dropped: []int{2, 3}}
		},
	}
	belowRP := func(b *built) corruptWant {
		bt := b.segs[1].batches[6]
		w := intact(b)
		w.badOffset, w.badSeg, w.badAt = bt.base, 1, bt.pos
		return w
	}
	for _, sd := range []shutdown{clean, unclean} {
		cases[fmt.Sprintf("below the recovery point (%v): flipped payload bit", sd)] = corruptCase{
			shutdown: sd,
			damage: func(t *testing.T, b *built) {
				bt := b.segs[1].batches[6]
				flip(t, b.path(1, layout.LogSuffix), int64(bt.pos)+70, 0x40)
			},
			want: belowRP,
		}
	}

	// Zeros and garbage.
	cases["last segment: tail zeroed"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			p := b.path(b.last(), layout.LogSuffix)
			data := readFile(t, p)
			clear(data[len(data)-16:])
			writeFile(t, p, data)
		},
		want: cutLast,
	}
	cases["last segment: all zeros"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			p := b.path(b.last(), layout.LogSuffix)
			writeFile(t, p, make([]byte, len(readFile(t, p))))
		},
		want: func(b *built) corruptWant {
			return corruptWant{end: b.segs[b.last()].base, cutSeg: b.last(), cutAt: 0}
		},
	}
	cases["last segment: zero padding after the end"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			appendBytes(t, b.path(b.last(), layout.LogSuffix), make([]byte, 4096))
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.cutSeg, w.cutAt = b.last(), record.Position(b.segs[b.last()].size)
			return w
		},
	}
	cases["last segment: garbage appended"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			garbage := bytes.Repeat([]byte("garbage!"), 13)
			appendBytes(t, b.path(b.last(), layout.LogSuffix), garbage)
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.cutSeg, w.cutAt = b.last(), record.Position(b.segs[b.last()].size)
			return w
		},
	}
	cases["last segment: a header promising a huge batch appended"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			h := make([]byte, 61)
			h[8], h[16] = 0x7f, 2 // length ~2 GiB, magic 2
			appendBytes(t, b.path(b.last(), layout.LogSuffix), h)
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.cutSeg, w.cutAt = b.last(), record.Position(b.segs[b.last()].size)
			return w
		},
	}
	cases["clean shutdown: garbage appended to the active segment"] = corruptCase{
		// The walk to the log end finds it: cut off, and appends go on
		// after the last batch, never after the garbage.
		shutdown: clean,
		damage: func(t *testing.T, b *built) {
			appendBytes(t, b.path(b.last(), layout.LogSuffix), []byte("garbage!"))
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.cutSeg, w.cutAt = b.last(), record.Position(b.segs[b.last()].size)
			return w
		},
	}

	// Index files.
	for _, suffix := range []string{layout.IndexSuffix, layout.TimeIndexSuffix} {
		entry := int64(8)
		if suffix == layout.TimeIndexSuffix {
			entry = 12
		}
		for _, sd := range []shutdown{clean, unclean} {
			seg0 := func(b *built) string { return b.path(0, suffix) }
			cases[fmt.Sprintf("segment 0 %s removed (%v)", suffix, sd)] = corruptCase{
				shutdown: sd,
				damage:   func(t *testing.T, b *built) { require.NoError(t, os.Remove(seg0(b))) },
				want: func(b *built) corruptWant {
					w := intact(b)
					w.rebuilt = []int{0}
					w.sameFiles = []string{seg0(b)}
					return w
				},
			}
			cases[fmt.Sprintf("segment 0 %s cut to a partial entry (%v)", suffix, sd)] = corruptCase{
				shutdown: sd,
				damage:   func(t *testing.T, b *built) { truncateFile(t, seg0(b), entry+3) },
				want: func(b *built) corruptWant {
					w := intact(b)
					w.sameFiles = []string{seg0(b)} // rebuilt on first use
					return w
				},
			}
			cases[fmt.Sprintf("segment 0 %s zero-padded as if untrimmed (%v)", suffix, sd)] = corruptCase{
				// A zero tail ends the entries, as Kafka's untrimmed
				// active segment leaves them: valid, used, kept.
				shutdown: sd,
				damage:   func(t *testing.T, b *built) { appendBytes(t, seg0(b), make([]byte, entry*100)) },
				want: func(b *built) corruptWant {
					w := intact(b)
					w.keptFiles = []string{seg0(b)}
					return w
				},
			}
			zeroed := corruptCase{
				shutdown: sd,
				damage: func(t *testing.T, b *built) {
					writeFile(t, seg0(b), make([]byte, len(readFile(t, seg0(b)))))
				},
				want: func(b *built) corruptWant {
					w := intact(b)
					if suffix == layout.IndexSuffix {
						// An empty offset index, valid and sparser.
						w.keptFiles = []string{seg0(b)}
					} else {
						// A sealed segment's time index ends with its
						// largest timestamp: rebuilt on first use.
						w.sameFiles = []string{seg0(b)}
					}
					return w
				},
			}
			cases[fmt.Sprintf("segment 0 %s zeroed (%v)", suffix, sd)] = zeroed
		}
		cases[fmt.Sprintf("segment 0 %s lost its last entry (clean)", suffix)] = corruptCase{
			// Whole entries dropped leave a valid, sparser index: kept.
			shutdown: clean,
			damage: func(t *testing.T, b *built) {
				p := b.path(0, suffix)
				truncateFile(t, p, int64(len(readFile(t, p)))-entry)
			},
			want: intact,
		}
		cases[fmt.Sprintf("last segment %s garbage (unclean)", suffix)] = corruptCase{
			shutdown: unclean,
			damage: func(t *testing.T, b *built) {
				writeFile(t, b.path(b.last(), suffix), bytes.Repeat([]byte{0xde, 0xad, 0xbe}, 33))
			},
			want: intact, // scanned, so rebuilt anyway
		}
		cases[fmt.Sprintf("last segment %s zero-padded (clean)", suffix)] = corruptCase{
			shutdown: clean,
			damage: func(t *testing.T, b *built) {
				appendBytes(t, b.path(b.last(), suffix), make([]byte, entry*10))
			},
			want: intact, // rebuilt when the first append opens it writable
		}
	}

	// Leftovers of deletes, cleanings, swaps and rebuilds.
	cases["stale .deleted files"] = corruptCase{
		shutdown: clean,
		damage: func(t *testing.T, b *built) {
			for _, s := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix} {
				writeFile(t, layout.SegmentPath(b.dir, 0, s+layout.DeletedSuffix), []byte("old"))
			}
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.removed = []string{"00000000000000000000.index.deleted", "00000000000000000000.log.deleted", "00000000000000000000.timeindex.deleted"}
			return w
		},
	}
	cases["stale .cleaned file"] = corruptCase{
		shutdown: clean,
		damage: func(t *testing.T, b *built) {
			writeFile(t, b.path(1, layout.LogSuffix+layout.CleanedSuffix), readFile(t, b.path(1, layout.LogSuffix)))
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.removed = []string{"00000000000000000019.log.cleaned"}
			return w
		},
	}
	cases["interrupted swap completed"] = corruptCase{
		shutdown: clean,
		damage: func(t *testing.T, b *built) {
			// A Kafka data directory (meta.properties): the log cleaner's
			// swaps are completed there. In logfs's own, which nothing
			// compacts, a swap is set aside (TestSwapInLogfsDirSetAside).
			writeFile(t, filepath.Join(b.data, "meta.properties"), []byte("version=1\n"))
			writeFile(t, b.path(1, layout.LogSuffix+layout.SwapSuffix), readFile(t, b.path(1, layout.LogSuffix)))
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.rebuilt = []int{1} // its old index files were replaced too
			w.sameFiles = []string{b.path(1, layout.IndexSuffix), b.path(1, layout.TimeIndexSuffix)}
			return w
		},
	}
	cases["swap of an unfinished split discarded"] = corruptCase{
		shutdown: clean,
		damage: func(t *testing.T, b *built) {
			writeFile(t, b.path(1, layout.LogSuffix+layout.SwapSuffix), []byte("half a split"))
			writeFile(t, b.path(1, layout.LogSuffix+layout.CleanedSuffix), []byte("the other half"))
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.removed = []string{"00000000000000000019.log.cleaned", "00000000000000000019.log.swap"}
			return w
		},
	}
	cases["orphan index files"] = corruptCase{
		shutdown: clean,
		damage: func(t *testing.T, b *built) {
			for _, s := range []string{layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix} {
				writeFile(t, layout.SegmentPath(b.dir, 100, s), []byte{1, 2, 3})
			}
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.removed = []string{"00000000000000000100.index", "00000000000000000100.timeindex", "00000000000000000100.viewindex"}
			return w
		},
	}
	cases["index rebuild interrupted (.tmp left)"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			writeFile(t, b.path(0, layout.IndexSuffix+".tmp"), make([]byte, 4096))
		},
		want: func(b *built) corruptWant {
			w := intact(b)
			w.removed = []string{"00000000000000000000.index.tmp"}
			return w
		},
	}
	for _, sd := range []shutdown{clean, unclean} {
		cases[fmt.Sprintf("active segment .log missing (%v)", sd)] = corruptCase{
			shutdown: sd,
			damage: func(t *testing.T, b *built) {
				require.NoError(t, os.Remove(b.path(b.last(), layout.LogSuffix)))
			},
			want: func(b *built) corruptWant {
				// Its offsets were durable (below the recovery point): the
				// log goes on at the recovery point, past a hole.
				w := corruptWant{end: b.segs[b.last()].base, cutSeg: -1}
				for _, s := range []string{layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix} {
					if exists(b.path(b.last(), s)) {
						w.removed = append(w.removed, filepath.Base(b.path(b.last(), s)))
					}
				}
				return lostDurableEnd(b, w)
			},
		}
	}
	cases["every segment file missing (unclean)"] = corruptCase{
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			for i := range b.segs {
				for _, s := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix} {
					os.Remove(b.path(i, s))
				}
			}
		},
		want: func(b *built) corruptWant {
			// An empty segment at the recovery point: offsets go on from
			// there, nothing is readable below it.
			return corruptWant{start: b.end, end: b.end, cutSeg: -1}
		},
	}
	for _, sd := range []shutdown{clean, unclean} {
		cases[fmt.Sprintf("segments below the log start checkpoint (%v)", sd)] = corruptCase{
			// Retention's renames reverted by a crash, or a broker that had
			// not deleted them yet.
			shutdown: sd,
			damage: func(t *testing.T, b *built) {
				tp := recovery.TopicPartition{Topic: "t", Partition: 0}
				require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(b.data, layout.LogStartFile),
					map[recovery.TopicPartition]record.Offset{tp: b.segs[2].base}))
			},
			want: func(b *built) corruptWant {
				w := intact(b)
				w.start, w.expired = b.segs[2].base, []int{0, 1}
				return w
			},
		}
	}
	cases["log end below the log start checkpoint (unclean)"] = corruptCase{
		// Retention's renames survived a crash that its roll did not.
		shutdown: unclean,
		damage: func(t *testing.T, b *built) {
			tp := recovery.TopicPartition{Topic: "t", Partition: 0}
			require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(b.data, layout.LogStartFile),
				map[recovery.TopicPartition]record.Offset{tp: b.end + 40}))
		},
		want: func(b *built) corruptWant {
			// Every segment goes (expired, not dropped: retention deleted
			// them); offsets go on from the log start, never handing out
			// 60-99 again.
			return corruptWant{start: b.end + 40, end: b.end + 40, cutSeg: -1, expired: []int{0, 1, 2, 3}}
		},
	}
	for _, sd := range []shutdown{clean, unclean} {
		cases[fmt.Sprintf("empty active segment with garbage indexes (%v)", sd)] = corruptCase{
			shutdown: sd,
			damage: func(t *testing.T, b *built) {
				writeFile(t, layout.SegmentPath(b.dir, b.end, layout.LogSuffix), nil)
				writeFile(t, layout.SegmentPath(b.dir, b.end, layout.IndexSuffix), []byte{0, 0, 0, 5, 0, 0, 1, 0})
				writeFile(t, layout.SegmentPath(b.dir, b.end, layout.TimeIndexSuffix), bytes.Repeat([]byte{9}, 24))
			},
			want: intact, // recreated empty: scanned (unclean) or rebuilt on the first append (clean)
		}
	}
	return cases
}

// TestCorruption damages a cleanly closed partition in every documented way
// and checks that it loads, read-only and writable, into a readable
// partition with the documented outcome (doc.go, "What recovery does with
// damaged files").
func TestCorruption(t *testing.T) {
	cases := corruptionCases(buildPartition(t, 60))
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := buildPartition(t, 60)
			require.Len(t, b.segs, 4, "the cases assume four segments")
			orig := map[string][]byte{}
			for _, p := range listDir(t, b.dir) {
				orig[p] = readFile(t, p)
			}
			c.damage(t, b)
			for _, p := range c.want(b).keptFiles {
				orig[p+" damaged"] = readFile(t, p)
			}
			switch c.shutdown {
			case unclean:
				removeMarker(t, b.data)
			case scanAll:
				removeMarker(t, b.data)
				require.NoError(t, os.Remove(filepath.Join(b.data, layout.RecoveryPointFile)))
			}
			w := c.want(b)
			if c.shutdown == unclean && w.custom == nil && w.badAt == 0 && w.badOffset == 0 &&
				w.cutSeg == b.last() && w.end < b.end && len(w.dropped) == 0 {
				w = lostDurableEnd(b, w)
			}
			checkCorruptionOutcome(t, b, c.shutdown, w, orig)
		})
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(dir, e.Name()))
	}
	return out
}

// treeDigest describes every file of a directory tree by name and content.
func treeDigest(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	m := map[string][32]byte{}
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		m[p] = sha256.Sum256(readFile(t, p))
		return nil
	}))
	return m
}

func checkCorruptionOutcome(t *testing.T, b *built, sd shutdown, w corruptWant, orig map[string][]byte) {
	base := func(i int) record.Offset { return b.segs[i].base }

	// Read-only first: nothing changes, the report says what would be done,
	// and every record up to the outcome's end reads back.
	before := treeDigest(t, b.data)
	ro, err := storage.Open(b.data, storage.Options{ReadOnly: true, Logger: testLogger()})
	require.NoError(t, err)
	roRep := ro.RecoveryReport()
	p, err := ro.Partition("t", 0)
	require.NoError(t, err)
	if w.roEnd != 0 {
		require.Equal(t, w.roEnd, p.EndOffset(), "read-only log end")
		w.roReadBack(t, b, p)
	} else {
		require.Equal(t, w.end, p.EndOffset(), "read-only log end")
		checkReadBack(t, b, p, w)
	}
	require.NoError(t, ro.Close())
	require.Equal(t, before, treeDigest(t, b.data), "a read-only open changes nothing")
	require.Equal(t, sd == clean, markerExists(b.data))

	// Writable.
	l, err := storage.Open(b.data, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	require.False(t, markerExists(b.data), "the marker is taken at open")
	rep := l.RecoveryReport()
	require.Len(t, rep.Partitions, 1)
	pr := rep.Partitions[0]
	for _, f := range listDir(t, b.dir) {
		require.False(t, strings.HasSuffix(f, ".tmp"), "%s left behind", f)
	}
	t.Logf("report:\n%s", reportText(rep))

	// The report: the cut, the drops, the removals, the rebuilds, and the
	// same plan read-only.
	if w.cutSeg < 0 {
		require.Empty(t, pr.Cuts, "no cut")
	} else {
		require.Len(t, pr.Cuts, 1)
		require.Equal(t, base(w.cutSeg), pr.Cuts[0].Base)
		require.Equal(t, w.cutAt, pr.Cuts[0].At)
		require.NotEmpty(t, pr.Cuts[0].Reason)
		st, err := os.Stat(b.path(w.cutSeg, layout.LogSuffix))
		require.NoError(t, err)
		require.Equal(t, int64(w.cutAt), st.Size(), "the .log is cut at its first invalid byte")
	}
	var dropped []record.Offset
	for _, d := range w.dropped {
		dropped = append(dropped, base(d))
		require.False(t, exists(b.path(d, layout.LogSuffix)), "dropped segment %d is gone", d)
	}
	var gotDropped []record.Offset
	for _, d := range pr.Dropped {
		gotDropped = append(gotDropped, d.Base)
	}
	require.Equal(t, dropped, gotDropped, "dropped segments")
	var expired, gotExpired []record.Offset
	for _, d := range w.expired {
		expired = append(expired, base(d))
	}
	for _, d := range pr.Expired {
		gotExpired = append(gotExpired, d.Base)
		require.False(t, exists(d.File), "expired segment %d is gone", d.Base)
	}
	require.Equal(t, expired, gotExpired, "expired segments")
	var removed []string
	for _, f := range pr.Removed {
		removed = append(removed, filepath.Base(f))
		require.False(t, exists(f), "%s removed", f)
	}
	sort.Strings(removed)
	require.Equal(t, w.removed, removed, "leftovers removed")
	var rebuilt []string
	for _, s := range w.rebuilt {
		rebuilt = append(rebuilt, b.path(s, layout.LogSuffix))
	}
	require.Equal(t, rebuilt, pr.Rebuilt, "indexes rebuilt at load")
	roPr := roRep.Partitions[0]
	cuts := slices.Clone(pr.Cuts)
	for i := range cuts {
		if cuts[i].Aside != "" {
			require.FileExists(t, cuts[i].Aside, "the cut bytes are kept aside")
		}
		cuts[i].Aside = "" // a read-only load keeps nothing aside
	}
	require.Equal(t, cuts, roPr.Cuts, "read-only reports the same cut")
	drops := slices.Clone(pr.Dropped)
	for i := range drops {
		require.FileExists(t, drops[i].AsideAs, "a segment set aside is kept")
		drops[i].AsideAs = "" // a read-only load renames nothing
	}
	require.Equal(t, drops, roPr.Dropped, "read-only reports the same segments set aside")
	require.Equal(t, pr.Removed, roPr.Removed, "read-only reports the same removals")

	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, w.end, p.EndOffset(), "log end")
	require.Equal(t, w.start, p.StartOffset(), "log start")
	checkReadBack(t, b, p, w)
	if w.hole {
		require.ErrorIs(t, l.Check(), storage.ErrHole, "Check reports the hole")
	} else if w.badAt == 0 && w.badOffset == 0 {
		require.NoError(t, l.Check())
		for _, f := range w.sameFiles {
			require.Equal(t, orig[f], readFile(t, f), "%s rebuilt byte for byte", filepath.Base(f))
		}
		for _, f := range w.keptFiles {
			require.Equal(t, orig[f+" damaged"], readFile(t, f), "%s is valid and left as it is", filepath.Base(f))
		}
	} else {
		require.Error(t, l.Check(), "Check reports the corruption left in place")
	}

	// Offsets go on: an append gets the log end offset, and the log closes
	// cleanly and reopens with the same records.
	if w.custom == nil && w.badAt == 0 && w.badOffset == 0 {
		appendN(t, p, 1)
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
		l, err = storage.Open(b.data, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
		require.NoError(t, err)
		require.Empty(t, l.RecoveryReport().Partitions[0].Cuts)
		p, err = l.Partition("t", 0)
		require.NoError(t, err)
		offs, err := readRecords(t, p)
		require.NoError(t, err)
		requireContiguous(t, offs, w.start, w.end+1)
		require.NoError(t, l.Check())
	}
	require.NoError(t, l.Close())

	if w.badAt == 0 && w.badOffset == 0 {
		return
	}
	// `logfs check --repair`: a forced recovery cuts the bad batch out,
	// keeps its bytes aside and keeps every other batch and segment; the
	// offsets of the batch are a hole, which reads and Check report.
	l, err = storage.Open(b.data, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1, ForceRecovery: true})
	require.NoError(t, err)
	pr = l.RecoveryReport().Partitions[0]
	require.Len(t, pr.Cuts, 1)
	require.Equal(t, base(w.badSeg), pr.Cuts[0].Base)
	require.Equal(t, w.badAt, pr.Cuts[0].At)
	require.FileExists(t, pr.Cuts[0].Aside, "the bad batch is kept aside")
	require.Empty(t, pr.Dropped, "no segment is dropped")
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, w.end, p.EndOffset())
	offs, err := readRecords(t, p)
	if len(pr.Holes) == 0 {
		// Garbage at the end of the active segment: cut off, nothing lost.
		require.NoError(t, err)
		requireContiguous(t, offs, 0, w.end)
		require.NoError(t, l.Check())
	} else {
		require.Len(t, pr.Holes, 1)
		require.Equal(t, w.badOffset, pr.Holes[0].From)
		require.ErrorIs(t, err, storage.ErrHole)
		requireContiguous(t, offs, 0, w.badOffset)
		r, err := p.NewReader(pr.Holes[0].To)
		require.NoError(t, err)
		n := 0
		for ; ; n++ {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			require.Equal(t, pr.Holes[0].To+record.Offset(n), rec.Offset)
		}
		require.NoError(t, r.Close())
		require.Equal(t, int(w.end-pr.Holes[0].To), n, "every record after the hole")
		require.ErrorContains(t, l.Check(), "hole")
	}
	appendN(t, p, 1)
	require.NoError(t, l.Close())
}

// checkReadBack reads the partition from its start: every record up to the
// outcome's end, or up to a corruption left in place and then its error.
func checkReadBack(t *testing.T, b *built, p *storage.Partition, w corruptWant) {
	t.Helper()
	if w.custom != nil {
		w.custom(t, b, p)
		return
	}
	offs, err := readRecords(t, p)
	if w.badAt == 0 && w.badOffset == 0 {
		require.NoError(t, err)
		requireContiguous(t, offs, w.start, w.end)
		return
	}
	var ce *record.CorruptError
	require.True(t, errors.As(err, &ce), "a read reaching the corruption fails with a *record.CorruptError, got %v", err)
	require.Equal(t, b.path(w.badSeg, layout.LogSuffix), ce.File)
	require.Equal(t, w.badAt, ce.Pos)
	requireContiguous(t, offs, w.start, w.badOffset)
}

func reportText(r *recovery.Report) string {
	var buf bytes.Buffer
	r.WriteText(&buf)
	return buf.String()
}

// legacyMessage encodes a Kafka v1 message (magic 1): offset, size, CRC-32
// (IEEE) of the rest, magic, attributes, timestamp, null key, value.
func legacyMessage(off int64, value string) []byte {
	body := []byte{1, 0}
	body = binary.BigEndian.AppendUint64(body, uint64(stamp(0)))
	body = binary.BigEndian.AppendUint32(body, 0xffffffff) // null key
	body = binary.BigEndian.AppendUint32(body, uint32(len(value)))
	body = append(body, value...)
	m := binary.BigEndian.AppendUint64(nil, uint64(off))
	m = binary.BigEndian.AppendUint32(m, uint32(4+len(body)))
	m = binary.BigEndian.AppendUint32(m, crc32.ChecksumIEEE(body))
	return append(m, body...)
}

// TestLegacyFormatNotCut: where v2 data stops at a well-formed legacy
// message, which Kafka reads and logfs does not, recovery refuses the
// partition instead of cutting it; the file is untouched.
func TestLegacyFormatNotCut(t *testing.T) {
	b := buildPartition(t, 60)
	p := b.path(b.last(), layout.LogSuffix)
	appendBytes(t, p, legacyMessage(int64(b.end), "old format"))
	before := readFile(t, p)
	removeMarker(t, b.data)
	_, err := storage.Open(b.data, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
	require.ErrorIs(t, err, recovery.ErrLegacyFormat)
	require.Equal(t, before, readFile(t, p), "nothing cut")
	// Zeros that happen to read as magic 0 are not a legacy message.
	require.NoError(t, os.WriteFile(p, append(before[:b.segs[b.last()].size:b.segs[b.last()].size], make([]byte, 64)...), 0o644))
	l, err := storage.Open(b.data, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	require.Len(t, l.RecoveryReport().Partitions[0].Cuts, 1)
	require.NoError(t, l.Close())
}
