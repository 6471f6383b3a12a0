package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// Repair never throws intact data away (issue 12, point 2): each test
// damages a cleanly closed partition of many segments the way an
// adversarial user would, repairs it (the writable open `logfs check
// --repair` makes) and reads back every record that was not in the
// damaged bytes.

// salvageValue is the value buildSalvage appends at offset off.
func salvageValue(off int) string {
	return fmt.Sprintf("record-%05d-%s", off, strings.Repeat("y", off%37))
}

// buildSalvage writes n records, one batch each, into partition t-0 of
// dir in segments of about 4000 bytes (some 40 records each), closes it
// cleanly and returns the partition folder and the segments' bases.
func buildSalvage(t *testing.T, dir string, n int) (string, []record.Offset) {
	t.Helper()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 1, small("segment.bytes=4000", "index.interval.bytes=300", "segment.index.bytes=8192"))
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		_, err := p.Append([]Record{{Timestamp: 1_700_000_000_000 + int64(i), Value: []byte(salvageValue(i))}})
		require.NoError(t, err)
	}
	segs, err := p.Segments()
	require.NoError(t, err)
	var bases []record.Offset
	for _, s := range segs {
		bases = append(bases, s.BaseOffset)
	}
	require.NoError(t, l.Close())
	return filepath.Join(dir, "t-0"), bases
}

// readFrom reads p from offset from until the end or the first error, and
// returns the records read by offset and that error (nil at the end).
func readFrom(t *testing.T, p *Partition, from record.Offset) (map[record.Offset]string, error) {
	t.Helper()
	got := map[record.Offset]string{}
	r, err := p.NewReader(from)
	if err != nil {
		return got, err
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got[rec.Offset] = string(rec.Value)
	}
}

// readEverything reads p from the log start, and from the offset after
// each error on (a hole or bad bytes), and returns every record it got
// and the errors it met.
func readEverything(t *testing.T, p *Partition) (map[record.Offset]string, []error) {
	t.Helper()
	all := map[record.Offset]string{}
	var errs []error
	from := p.StartOffset()
	for from < p.EndOffset() {
		got, err := readFrom(t, p, from)
		last := from - 1
		for off, v := range got {
			all[off] = v
			last = max(last, off)
		}
		if err == nil {
			break
		}
		errs = append(errs, err)
		// Go on from the next offset a read can start at.
		for from = last + 1; from < p.EndOffset(); from++ {
			if got, err := readFrom(t, p, from); len(got) > 0 || err == nil {
				break
			}
		}
	}
	return all, errs
}

// repairDir opens dir as `logfs check --repair` does.
func repairDir(t *testing.T, dir string) *Log {
	t.Helper()
	l, err := Open(dir, Options{ForceRecovery: true, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	return l
}

// requireRecords checks that got holds offset off with its value for
// every off in [from, to) not in lost.
func requireRecords(t *testing.T, got map[record.Offset]string, from, to record.Offset, lost func(record.Offset) bool) {
	t.Helper()
	missing := 0
	for off := from; off < to; off++ {
		if lost != nil && lost(off) {
			continue
		}
		v, ok := got[off]
		if !ok {
			missing++
			continue
		}
		require.Equal(t, salvageValue(int(off)), v, "offset %d", off)
	}
	require.Zero(t, missing, "records in [%d, %d) that should have survived are missing", from, to)
}

// filesWith lists the files of dir whose names contain sub.
func filesWith(t *testing.T, dir, sub string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), sub) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestRepairFlippedByteKeepsLaterSegments: one flipped byte in segment 8
// of 43 used to make repair drop every later segment. Now the bad batch is
// cut out and kept aside in a .cut file, every other record stays, reads
// that reach the hole fail with ErrHole, reads after it work, Check names
// the hole, and appends go on at the old log end.
func TestRepairFlippedByteKeepsLaterSegments(t *testing.T) {
	dir := t.TempDir()
	pdir, bases := buildSalvage(t, dir, 1720)
	require.GreaterOrEqual(t, len(bases), 43, "segments")
	end := record.Offset(1720)
	seg := bases[8]
	logPath := layout.SegmentPath(pdir, seg, layout.LogSuffix)
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	at := len(data) / 2
	data[at] ^= 0x40
	require.NoError(t, os.WriteFile(logPath, data, 0o644))

	// check (read-only, forced) says what repair would cut.
	ro, err := Open(dir, Options{ReadOnly: true, ForceRecovery: true, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	rp, err := ro.Partition("t", 0)
	require.NoError(t, err)
	lines := rp.Recovery().Lines
	require.NotEmpty(t, lines)
	require.Contains(t, lines[0], "would cut "+filepath.Base(logPath))
	require.Error(t, ro.Check())
	require.NoError(t, ro.Close())

	l := repairDir(t, dir)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, end, p.EndOffset(), "the log end stays")
	rec := p.Recovery()
	require.Empty(t, rec.Dropped, "no segment set aside")
	require.Len(t, filesWith(t, pdir, ".log.cut-"), 1, "the bad bytes are kept aside: %v", rec.Lines)
	segsAfter, err := p.Segments()
	require.NoError(t, err)
	require.Len(t, segsAfter, len(bases), "every segment stays")

	// Exactly one batch (one record) is lost, in segment 8.
	got, errs := readEverything(t, p)
	lost := map[record.Offset]bool{}
	for off := record.Offset(0); off < end; off++ {
		if _, ok := got[off]; !ok {
			lost[off] = true
		}
	}
	require.Len(t, lost, 1, "one record lost")
	for off := range lost {
		require.True(t, off >= seg && off < bases[9], "the lost record %d is in segment %d", off, seg)
	}
	requireRecords(t, got, 0, end, func(o record.Offset) bool { return lost[o] })
	require.NotEmpty(t, errs)
	require.ErrorIs(t, errs[0], ErrHole, "the read that reaches the hole fails")
	err = l.Check()
	require.ErrorIs(t, err, ErrCheck)
	require.ErrorContains(t, err, "hole")

	off, err := p.Append([]Record{{Value: []byte("after")}})
	require.NoError(t, err)
	require.Equal(t, end, off, "no offset is handed out twice")
	require.NoError(t, l.Close())

	// A second repair finds nothing more to cut and keeps the .cut file.
	l = repairDir(t, dir)
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Zero(t, p.Recovery().CutBytes)
	require.Len(t, filesWith(t, pdir, ".log.cut-"), 1)
	require.NoError(t, l.Close())
}

// TestRepairJunkAfterSealedSegment: junk after the last batch of a sealed
// segment is cut off and kept aside; nothing is lost, no hole, Check
// passes after the repair, and the later segments stay.
func TestRepairJunkAfterSealedSegment(t *testing.T) {
	dir := t.TempDir()
	pdir, bases := buildSalvage(t, dir, 600)
	logPath := layout.SegmentPath(pdir, bases[3], layout.LogSuffix)
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte(strings.Repeat("junk!", 40)))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l := repairDir(t, dir)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, record.Offset(600), p.EndOffset())
	require.Equal(t, int64(200), p.Recovery().CutBytes)
	cut := filesWith(t, pdir, ".log.cut-")
	require.Len(t, cut, 1)
	kept, err := os.ReadFile(filepath.Join(pdir, cut[0]))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("junk!", 40), string(kept), "the cut bytes are kept as they were")
	got, err := readFrom(t, p, 0)
	require.NoError(t, err)
	requireRecords(t, got, 0, 600, nil)
	require.NoError(t, l.Check())
	require.NoError(t, l.Close())
}

// TestRepairStrayGarbageLog: a garbage .log named inside the log (it
// overlaps a segment) and one named past its end are set aside as
// *.stray, not merged; the log end does not move and nothing is lost.
func TestRepairStrayGarbageLog(t *testing.T) {
	dir := t.TempDir()
	pdir, bases := buildSalvage(t, dir, 600)
	garbage := []byte(strings.Repeat("\x17garbage bytes\x00", 300))
	inside := layout.SegmentPath(pdir, bases[4]+5, layout.LogSuffix)
	past := layout.SegmentPath(pdir, 99_999, layout.LogSuffix)
	require.NoError(t, os.WriteFile(inside, garbage, 0o644))
	require.NoError(t, os.WriteFile(past, garbage, 0o644))

	l := repairDir(t, dir)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, record.Offset(600), p.EndOffset(), "the log end does not move")
	require.ElementsMatch(t, []record.Offset{bases[4] + 5, 99_999}, p.Recovery().Dropped)
	require.FileExists(t, inside+layout.StraySuffix)
	require.FileExists(t, past+layout.StraySuffix)
	require.NoFileExists(t, inside)
	got, err := readFrom(t, p, 0)
	require.NoError(t, err)
	requireRecords(t, got, 0, 600, nil)
	require.NoError(t, l.Check())
	off, err := p.Append([]Record{{Value: []byte("after")}})
	require.NoError(t, err)
	require.Equal(t, record.Offset(600), off)
	require.NoError(t, l.Close())
}

// TestRepairRenamedSegment: a segment renamed under another base offset
// is set aside, not merged; its records are a hole (reported), the rest
// is readable.
func TestRepairRenamedSegment(t *testing.T) {
	dir := t.TempDir()
	pdir, bases := buildSalvage(t, dir, 600)
	from := layout.SegmentPath(pdir, bases[5], "")
	to := layout.SegmentPath(pdir, bases[5]+7, "")
	for _, suf := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix} {
		require.NoError(t, os.Rename(from+suf, to+suf))
	}
	l := repairDir(t, dir)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, record.Offset(600), p.EndOffset())
	require.Equal(t, []record.Offset{bases[5] + 7}, p.Recovery().Dropped)
	require.FileExists(t, to+layout.LogSuffix+layout.StraySuffix)
	got, errs := readEverything(t, p)
	inHole := func(o record.Offset) bool { return o >= bases[5] && o < bases[6] }
	requireRecords(t, got, 0, 600, inHole)
	require.NotEmpty(t, errs)
	require.ErrorIs(t, errs[0], ErrHole)
	require.ErrorContains(t, l.Check(), "hole")
	require.NoError(t, l.Close())
}

// TestEmptiedMiddleLog: a sealed .log emptied in the middle is a hole in a
// partition logfs wrote: a read that reaches it fails (on a clean open,
// which trusts the files, and after repair), Check reports it, and the
// records after it stay readable.
func TestEmptiedMiddleLog(t *testing.T) {
	dir := t.TempDir()
	pdir, bases := buildSalvage(t, dir, 600)
	require.NoError(t, os.Truncate(layout.SegmentPath(pdir, bases[6], layout.LogSuffix), 0))
	inHole := func(o record.Offset) bool { return o >= bases[6] && o < bases[7] }
	for _, open := range []string{"clean", "repair"} {
		var l *Log
		if open == "clean" {
			var err error
			l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
		} else {
			l = repairDir(t, dir)
		}
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		got, err := readFrom(t, p, 0)
		require.ErrorIs(t, err, ErrHole, "%s: offset 0 does not jump over the hole", open)
		require.Len(t, got, int(bases[6]), "%s: everything before the hole", open)
		all, _ := readEverything(t, p)
		requireRecords(t, all, 0, 600, inHole)
		_, err = p.NewReader(bases[6] + 3)
		if err == nil {
			_, err = readFrom(t, p, bases[6]+3)
		}
		require.ErrorIs(t, err, ErrHole, "%s: a read inside the hole", open)
		_, err = p.NewView(Values, bases[6]+3)
		require.ErrorIs(t, err, ErrHole, "%s: a record file from inside the hole does not start later", open)
		require.ErrorContains(t, l.Check(), "hole", open)
		require.Equal(t, record.Offset(600), p.EndOffset(), open)
		require.NoError(t, l.Close())
	}
}

// TestCopyUnderHigherName: a copy of a segment under a base offset past
// the log end used to move the log end back, so that the next append got
// an offset that existed. The copy is set aside, on a clean open as after
// a crash, and the next append gets the log end.
func TestCopyUnderHigherName(t *testing.T) {
	for _, shutdown := range []string{"clean", "unclean"} {
		dir := t.TempDir()
		pdir, bases := buildSalvage(t, dir, 600)
		data, err := os.ReadFile(layout.SegmentPath(pdir, bases[0], layout.LogSuffix))
		require.NoError(t, err)
		copyPath := layout.SegmentPath(pdir, 5000, layout.LogSuffix)
		require.NoError(t, os.WriteFile(copyPath, data, 0o644))
		if shutdown == "unclean" {
			require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
		}
		l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err)
		p, err := l.Partition("t", 0)
		require.NoError(t, err)
		require.Equal(t, record.Offset(600), p.EndOffset(), "%s: the log end does not move back", shutdown)
		require.Equal(t, []record.Offset{5000}, p.Recovery().Dropped, shutdown)
		require.FileExists(t, copyPath+layout.StraySuffix, shutdown)
		off, err := p.Append([]Record{{Value: []byte("after")}})
		require.NoError(t, err)
		require.Equal(t, record.Offset(600), off, "%s: no offset handed out twice", shutdown)
		got, err := readFrom(t, p, 0)
		require.NoError(t, err)
		requireRecords(t, got, 0, 600, nil)
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
	}
}

// TestRepairLostDurableEndIsAHole: bad bytes in the last batch of the
// last segment, below the recovery point (the records were synced, and
// may have been read). Repair cuts them off and keeps them aside, and the
// log goes on at the recovery point: the lost offset is a hole, never
// handed out again.
func TestRepairLostDurableEndIsAHole(t *testing.T) {
	dir := t.TempDir()
	pdir, bases := buildSalvage(t, dir, 1720)
	end := record.Offset(1720)
	last := bases[len(bases)-1]
	logPath := layout.SegmentPath(pdir, last, layout.LogSuffix)
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	data[len(data)-3] ^= 0x40
	require.NoError(t, os.WriteFile(logPath, data, 0o644))

	l := repairDir(t, dir)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, end, p.EndOffset(), "the log end stays at the recovery point")
	require.Len(t, filesWith(t, pdir, ".log.cut-"), 1, "the bad bytes are kept aside")
	got, errs := readEverything(t, p)
	requireRecords(t, got, 0, end-1, func(record.Offset) bool { return false })
	_, ok := got[end-1]
	require.False(t, ok, "the damaged record is not served")
	require.NotEmpty(t, errs)
	require.ErrorIs(t, errs[0], ErrHole, "the read that reaches the lost offset fails")
	require.ErrorContains(t, l.Check(), "hole")

	off, err := p.Append([]Record{{Value: []byte("after")}})
	require.NoError(t, err)
	require.Equal(t, end, off, "no offset is handed out twice")
	require.NoError(t, l.Close())

	// The next start (clean) keeps it so.
	l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, end+1, p.EndOffset())
	off, err = p.Append([]Record{{Value: []byte("again")}})
	require.NoError(t, err)
	require.Equal(t, end+1, off)
	require.NoError(t, l.Close())
}
