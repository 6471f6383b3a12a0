package recovery_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// adv32Open opens b's data directory with opts (a quiet logger, no
// retention) and returns the log and partition t-0.
func adv32Open(t *testing.T, data string, opts storage.Options) (*storage.Log, *storage.Partition) {
	t.Helper()
	opts.Logger = testLogger()
	opts.RetentionCheckInterval = -1
	l, err := storage.Open(data, opts)
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	return l, p
}

// adv32ReadAll requires every record [0, end) to read back with its bytes.
func adv32ReadAll(t *testing.T, p *storage.Partition, end record.Offset) {
	t.Helper()
	offs, err := readRecords(t, p)
	require.NoError(t, err)
	requireContiguous(t, offs, 0, end)
}

// TestAdv32GarbageSwapKeepsSegment: a NAME.log.swap that cannot be the log
// cleaner's output must not replace the intact segments it names: "Recovery
// and repair never delete a batch that passes its checks". In logfs's own
// data directory nothing compacts, so no swap is; in a Kafka one (with
// meta.properties) a swap that holds no valid batch or reaches into the
// last segment is not. Either way every record reads back and the swap is
// kept, byte for byte, as NAME.log.swap.stray. (In a Kafka directory a
// swap holding a segment's first batch alone is what a cleaner could
// write, and is completed: not a case here.)
func TestAdv32GarbageSwapKeepsSegment(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kafka bool // also in a Kafka data directory
		swap  func(b *built) []byte
	}{
		{"empty", true, func(*built) []byte { return nil }},
		{"garbage", true, func(*built) []byte { return []byte("not a batch at all, just bytes") }},
		{"first batch only", false, func(b *built) []byte {
			bi := b.segs[1].batches[0]
			return readFile(t, b.path(1, layout.LogSuffix))[:bi.size]
		}},
		{"copy of the last segment", true, func(b *built) []byte {
			return readFile(t, b.path(b.last(), layout.LogSuffix))
		}},
	} {
		for _, kafka := range []bool{false, true} {
			if kafka && !tc.kafka {
				continue
			}
			for _, force := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/kafka=%v/force=%v", tc.name, kafka, force), func(t *testing.T) {
					b := buildPartition(t, 60)
					require.Greater(t, len(b.segs), 3)
					if kafka {
						writeFile(t, filepath.Join(b.data, "meta.properties"), []byte("version=1\n"))
					}
					swap := b.path(1, layout.LogSuffix+layout.SwapSuffix)
					planted := tc.swap(b)
					writeFile(t, swap, planted)

					ro, p := adv32Open(t, b.data, storage.Options{ReadOnly: true})
					adv32ReadAll(t, p, b.end)
					require.NotEmpty(t, p.Recovery().Lines, "a read-only open (logfs check) reports the swap")
					require.NoError(t, ro.Close())
					require.FileExists(t, swap, "a read-only open changes nothing")

					l, p := adv32Open(t, b.data, storage.Options{ForceRecovery: force})
					adv32ReadAll(t, p, b.end)
					require.NoError(t, l.Close())
					require.NoFileExists(t, swap)
					require.Equal(t, string(planted), string(readFile(t, swap+layout.StraySuffix)), "the swap is kept aside")
					for i := range b.segs {
						require.FileExists(t, b.path(i, layout.LogSuffix))
					}
				})
			}
		}
	}
}

// TestAdv32MisnamedSignedSegment: a file whose 20 characters before the
// dot are a signed number ("+000…019.log", "-000…000.log") is not a
// segment name Kafka or logfs writes; planted beside a partition it must
// neither stop the directory from opening nor take a real segment's place.
func TestAdv32MisnamedSignedSegment(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  func(b *built) string
		bytes func(b *built) []byte
	}{
		{"plus copy of segment 1", func(b *built) string {
			return "+" + layout.SegmentFileName(b.segs[1].base, layout.LogSuffix)[1:]
		}, func(b *built) []byte { return readFile(t, b.path(1, layout.LogSuffix)) }},
		{"plus garbage past the end", func(b *built) string {
			return "+" + layout.SegmentFileName(9999, layout.LogSuffix)[1:]
		}, func(*built) []byte { return []byte("garbage") }},
		{"minus zero garbage", func(b *built) string {
			return "-" + layout.SegmentFileName(0, layout.LogSuffix)[1:]
		}, func(*built) []byte { return []byte("garbage") }},
	} {
		for _, sd := range []string{"clean", "unclean", "force"} {
			t.Run(tc.name+"/"+sd, func(t *testing.T) {
				b := buildPartition(t, 60)
				planted := filepath.Join(b.dir, tc.file(b))
				writeFile(t, planted, tc.bytes(b))
				opts := storage.Options{}
				switch sd {
				case "unclean":
					removeMarker(t, b.data)
				case "force":
					opts.ForceRecovery = true
				}
				l, p := adv32Open(t, b.data, opts)
				adv32ReadAll(t, p, b.end)
				require.NoError(t, l.Close())
				for i := range b.segs {
					require.FileExists(t, b.path(i, layout.LogSuffix))
				}
				// Reopen: still whole.
				l, p = adv32Open(t, b.data, storage.Options{ReadOnly: true})
				adv32ReadAll(t, p, b.end)
				require.NoError(t, l.Close())
			})
		}
	}
}

// adv32Dump reads every record of every partition of data (read-only,
// every data record up to the log end) and every partition's start and end.
func adv32Dump(t *testing.T, data string) map[string][]string {
	t.Helper()
	l, err := storage.Open(data, storage.Options{ReadOnly: true, Logger: testLogger(), Isolation: storage.ReadUncommitted})
	require.NoError(t, err)
	defer l.Close()
	out := map[string][]string{}
	for _, name := range l.Topics() {
		top, err := l.Topic(name)
		require.NoError(t, err)
		for _, p := range top.Partitions() {
			key := p.String()
			out[key] = append(out[key], fmt.Sprintf("start %d end %d", p.StartOffset(), p.EndOffset()))
			r, err := p.NewReader(p.StartOffset())
			require.NoError(t, err, key)
			for {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err, key)
				out[key] = append(out[key], fmt.Sprintf("%d %d %x %x %v", rec.Offset, rec.Timestamp, rec.Key, rec.Value, rec.Headers))
			}
			r.Close()
		}
	}
	return out
}

// adv32Leftovers lists the .cut-* and .stray files under data.
func adv32Leftovers(t *testing.T, data string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), layout.CutInfix) || strings.Contains(d.Name(), layout.StraySuffix) {
			out = append(out, p)
		}
		return nil
	}))
	return out
}

// TestAdv32RepairFixtureCopies runs `logfs check --repair`'s open
// (ForceRecovery, writable) twice on a copy of every Kafka fixture: a
// broker's intact data must read back exactly as before, with nothing cut
// or set aside ("every record reads back").
func TestAdv32RepairFixtureCopies(t *testing.T) {
	for _, d := range fixtures.DataDirs(t) {
		t.Run(d.Set, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			copyTree(t, d.Path, data)
			want := adv32Dump(t, data)
			require.NotEmpty(t, want)
			for round := 1; round <= 2; round++ {
				l, err := storage.Open(data, storage.Options{ForceRecovery: true, Logger: testLogger(), RetentionCheckInterval: -1})
				require.NoError(t, err, "repair round %d", round)
				require.NoError(t, l.Check(), "repair round %d", round)
				require.NoError(t, l.Close())
				require.Empty(t, adv32Leftovers(t, data), "repair round %d cut or set aside intact data", round)
				require.Equal(t, want, adv32Dump(t, data), "repair round %d", round)
			}
		})
	}
}

// TestAdv32RepairTwiceMidSegmentFlip flips one byte of a batch in the
// middle of a sealed segment and repairs twice: the batch alone goes (kept
// aside once), every other record of that segment and every later segment
// stays, and the second repair changes nothing.
func TestAdv32RepairTwiceMidSegmentFlip(t *testing.T) {
	b := buildPartition(t, 80)
	require.Greater(t, len(b.segs), 3)
	bi := b.segs[1].batches[len(b.segs[1].batches)/2]
	lp := b.path(1, layout.LogSuffix)
	raw := readFile(t, lp)
	raw[int64(bi.pos)+bi.size-3] ^= 0x40
	writeFile(t, lp, raw)

	var after map[string][32]byte
	for round := 1; round <= 2; round++ {
		l, p := adv32Open(t, b.data, storage.Options{ForceRecovery: true})
		require.Equal(t, b.end, p.EndOffset(), "round %d", round)
		// Every offset but the damaged batch's reads back.
		for off := record.Offset(0); off < b.end; off++ {
			if off >= bi.base && off <= bi.last {
				continue
			}
			r, err := p.NewReader(off)
			require.NoError(t, err, "round %d offset %d", round, off)
			rec, err := r.Next()
			require.NoError(t, err, "round %d offset %d", round, off)
			require.Equal(t, off, rec.Offset)
			require.Equal(t, value(off), string(rec.Value))
			r.Close()
		}
		require.NoError(t, l.Close())
		cuts := adv32Leftovers(t, b.data)
		require.Len(t, cuts, 1, "round %d: %v", round, cuts)
		require.Equal(t, raw[bi.pos:int64(bi.pos)+bi.size], readFile(t, cuts[0]), "the bad batch is kept aside")
		for i := range b.segs {
			require.FileExists(t, b.path(i, layout.LogSuffix))
		}
		d := treeDigest(t, b.data)
		if round == 2 {
			require.Equal(t, after, d, "a second repair changes nothing")
		}
		after = d
	}
}

// TestAdv32PlantedSwapEntries plants a symbolic link and a FIFO as a
// segment's NAME.log.swap. "Nothing in a data directory is followed
// through a symlink" and a planted link or FIFO "is treated as absent":
// the open must not hang or fail, must not put the link in place of the
// segment, and every record must read back.
func TestAdv32PlantedSwapEntries(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			b := buildPartition(t, 60)
			swap := b.path(1, layout.LogSuffix+layout.SwapSuffix)
			target := filepath.Join(t.TempDir(), "precious")
			orig := readFile(t, b.path(1, layout.LogSuffix))
			writeFile(t, target, orig[:b.segs[1].batches[0].size])
			if kind == "symlink" {
				require.NoError(t, os.Symlink(target, swap))
			} else {
				require.NoError(t, syscall.Mkfifo(swap, 0o600))
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				l, err := storage.Open(b.data, storage.Options{ForceRecovery: true, Logger: testLogger(), RetentionCheckInterval: -1})
				if !assert.NoError(t, err) {
					return
				}
				defer l.Close()
				p, err := l.Partition("t", 0)
				if !assert.NoError(t, err) {
					return
				}
				offs, err := readRecords(t, p)
				assert.NoError(t, err)
				assert.Len(t, offs, int(b.end))
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("open hangs on a planted .log.swap")
			}
			st, err := os.Lstat(b.path(1, layout.LogSuffix))
			require.NoError(t, err)
			require.True(t, st.Mode().IsRegular(), "segment 1's .log is %v", st.Mode())
			require.Equal(t, orig, readFile(t, b.path(1, layout.LogSuffix)))
			require.Equal(t, orig[:b.segs[1].batches[0].size], readFile(t, target), "the link's target is untouched")
		})
	}
}

// TestAdv32RepairBadLengthMidSegment damages the length field of a batch
// in the middle of a sealed segment in several ways (huge, negative, zero,
// one that swallows the next batch, one that stops short inside itself)
// and repairs: only the damaged batch may go; every other batch of that
// segment and every later segment read back.
func TestAdv32RepairBadLengthMidSegment(t *testing.T) {
	for _, tc := range []struct {
		name   string
		length func(cur, next batchInfo) uint32
	}{
		{"huge", func(batchInfo, batchInfo) uint32 { return 0x7fffffff }},
		{"negative", func(batchInfo, batchInfo) uint32 { return 0xfffffff0 }},
		{"zero", func(batchInfo, batchInfo) uint32 { return 0 }},
		{"swallows the next batch", func(cur, next batchInfo) uint32 { return uint32(cur.size + next.size - 12) }},
		{"short", func(cur, _ batchInfo) uint32 { return uint32(cur.size - 12 - 7) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := buildPartition(t, 80)
			bs := b.segs[1].batches
			require.Greater(t, len(bs), 3)
			k := len(bs) / 2
			cur, next := bs[k], bs[k+1]
			lp := b.path(1, layout.LogSuffix)
			raw := readFile(t, lp)
			binary.BigEndian.PutUint32(raw[cur.pos+8:], tc.length(cur, next))
			writeFile(t, lp, raw)

			l, p := adv32Open(t, b.data, storage.Options{ForceRecovery: true})
			defer l.Close()
			require.Equal(t, b.end, p.EndOffset())
			for off := record.Offset(0); off < b.end; off++ {
				if off >= cur.base && off <= cur.last {
					continue
				}
				r, err := p.NewReader(off)
				require.NoError(t, err, "offset %d", off)
				rec, err := r.Next()
				require.NoError(t, err, "offset %d", off)
				require.Equal(t, off, rec.Offset)
				require.Equal(t, value(off), string(rec.Value))
				r.Close()
			}
		})
	}
}

// TestAdv32CutFilesNeverOverwritten: two crashes in a row each tear a write
// of the same length at the same place of the last segment (no append in
// between). Each recovery keeps the torn bytes aside in
// NAME.log.cut-FROM-TO; README: "logfs never deletes a .cut-* or .stray
// file". The second recovery must not replace the first one's file.
func TestAdv32CutFilesNeverOverwritten(t *testing.T) {
	b := buildPartition(t, 30)
	lp := b.path(b.last(), layout.LogSuffix)
	tear := func(junk string) {
		f, err := os.OpenFile(lp, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.WriteString(junk)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		removeMarker(t, b.data)
		l, p := adv32Open(t, b.data, storage.Options{})
		adv32ReadAll(t, p, b.end)
		require.NoError(t, l.Close())
	}
	tear("first torn w")
	tear("second torn ")
	var kept []string
	for _, c := range adv32Leftovers(t, b.data) {
		kept = append(kept, string(readFile(t, c)))
	}
	require.ElementsMatch(t, []string{"first torn w", "second torn "}, kept, "every torn write is kept aside")
}

// TestAdv32FixtureCorruptBatchRepair flips one byte inside the middle
// batch of the fullest segment of every Kafka fixture (a copy): the
// read-only check finds it, and a repair cuts that batch alone; every other
// record reads back with its bytes.
func TestAdv32FixtureCorruptBatchRepair(t *testing.T) {
	for _, d := range fixtures.DataDirs(t) {
		t.Run(d.Set, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			copyTree(t, d.Path, data)
			want := adv32Dump(t, data)
			logs, err := filepath.Glob(filepath.Join(data, "*", "*"+layout.LogSuffix))
			require.NoError(t, err)
			var victim string
			var segs []segInfo
			for _, lp := range logs {
				s := scanSegments(t, filepath.Dir(lp))
				for _, si := range s {
					if len(si.batches) >= 3 && (segs == nil || len(si.batches) > len(segs[0].batches)) {
						segs, victim = []segInfo{si}, layout.SegmentPath(filepath.Dir(lp), si.base, layout.LogSuffix)
					}
				}
			}
			require.NotEmpty(t, victim)
			bi := segs[0].batches[len(segs[0].batches)/2]
			raw := readFile(t, victim)
			raw[int64(bi.pos)+bi.size-2] ^= 0x01
			writeFile(t, victim, raw)
			part := filepath.Base(filepath.Dir(victim))

			ro, err := storage.Open(data, storage.Options{ReadOnly: true, ForceRecovery: true, Logger: testLogger()})
			require.NoError(t, err)
			cerr := ro.Check()
			found := ro.RecoveryReport().Problems() > 0 || cerr != nil
			require.NoError(t, ro.Close())
			require.True(t, found, "check finds the flipped byte in %s", victim)

			l, err := storage.Open(data, storage.Options{ForceRecovery: true, Logger: testLogger(), RetentionCheckInterval: -1})
			require.NoError(t, err)
			require.NoError(t, l.Close())
			got := adv32Dump(t, data)
			require.Contains(t, want, part)
			for key, recs := range want {
				if key != part {
					require.Equal(t, recs, got[key], key)
					continue
				}
				// The victim's partition: every record but the cut batch's.
				var keep []string
				for _, r := range recs[1:] {
					var off int64
					fmt.Sscanf(r, "%d", &off)
					if off >= int64(bi.base) && off <= int64(bi.last) {
						continue
					}
					keep = append(keep, r)
				}
				require.Less(t, len(keep), len(recs)-1, "the batch at %d-%d is cut", bi.base, bi.last)
				require.Equal(t, keep, got[key][1:], key)
			}
		})
	}
}

// TestAdv32SparseTailCut: after a crash, the last .log has a sparse tail of
// 3 GiB (truncate -s: no disk space, every byte zero), past the 2 GiB a
// segment can hold. Recovery cuts it off without a .cut file (zeros hold
// nothing to keep) and every record reads back. It reads neither the hole
// nor, past 2 GiB, anything: Resync steps between magic bytes and stops
// at MaxInt32, and the zero check skips holes (SEEK_DATA); before, this
// took about 6 s per GiB.
func TestAdv32SparseTailCut(t *testing.T) {
	b := buildPartition(t, 60)
	removeMarker(t, b.data)
	last := b.path(b.last(), layout.LogSuffix)
	size := int64(len(readFile(t, last)))
	require.NoError(t, os.Truncate(last, 3<<30))
	l, p := adv32Open(t, b.data, storage.Options{})
	adv32ReadAll(t, p, b.end)
	require.NoError(t, l.Close())
	st, err := os.Stat(last)
	require.NoError(t, err)
	require.Equal(t, size, st.Size(), "the zero tail is cut off")
	matches, err := filepath.Glob(last + layout.CutInfix + "*")
	require.NoError(t, err)
	require.Empty(t, matches, "zeros are not kept aside")
}

// TestAdv32OrphanIndexSwapRemoved: an index swap whose .log.swap is gone
// (a kill after a swap's .log was set aside and before its index swaps were
// removed, or a planted file) is removed, not renamed over the segment's
// own index, in a Kafka data directory, where swaps are completed, and in
// logfs's own.
func TestAdv32OrphanIndexSwapRemoved(t *testing.T) {
	for _, kafka := range []bool{false, true} {
		t.Run(fmt.Sprintf("kafka=%v", kafka), func(t *testing.T) {
			b := buildPartition(t, 60)
			if kafka {
				writeFile(t, filepath.Join(b.data, "meta.properties"), []byte("version=1\n"))
			}
			tim := b.path(1, layout.TimeIndexSuffix)
			orig := readFile(t, tim)
			writeFile(t, tim+layout.SwapSuffix, []byte("not a time index"))
			l, p := adv32Open(t, b.data, storage.Options{})
			adv32ReadAll(t, p, b.end)
			require.NoError(t, l.Close())
			require.NoFileExists(t, tim+layout.SwapSuffix)
			require.Equal(t, orig, readFile(t, tim), "the segment's own time index stays")
		})
	}
}
