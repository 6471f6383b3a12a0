package storage

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
)

// followed opens dir read-only and following, at isolation iso.
func followed(t *testing.T, dir string, iso Isolation) (*Log, *Partition) {
	l := openLog(t, dir, Options{ReadOnly: true, Follow: true, Isolation: iso})
	p, err := l.Partition("f", 0)
	require.NoError(t, err)
	return l, p
}

// eventually waits for cond, as a reader of a followed mount waits.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// viewText reads a whole view from start.
func viewText(t *testing.T, p *Partition, start record.Offset) (string, error) {
	v, err := p.NewView(Values, start)
	if err != nil {
		return "", err
	}
	defer v.Close()
	var out []byte
	buf := make([]byte, 4096)
	for off := int64(0); ; {
		n, err := v.ReadAt(buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			return string(out), nil
		}
		if err != nil {
			return string(out), err
		}
	}
}

func TestFollowBroker(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Create(dir, "f", 0, broker.Options{SegmentBytes: 1024, IndexInterval: 100})
	require.NoError(t, err)
	var want []string
	write := func(n int) {
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("r%d %s", len(want), strings.Repeat("x", len(want)%30))
			_, err := b.Write(-1, false, v)
			require.NoError(t, err)
			want = append(want, v)
		}
	}
	write(20)
	require.NoError(t, b.Checkpoint(b.End()))
	_, pc := followed(t, dir, ReadCommitted)
	_, pu := followed(t, dir, ReadUncommitted)
	text := func(from int) string { return strings.Join(want[from:], "\n") + "\n" }
	got, err := viewText(t, pc, 0)
	require.NoError(t, err)
	require.Equal(t, text(0), got)

	// New batches and rolls: read_uncommitted sees them at once; read_committed once the
	// high watermark covers them.
	v, err := pu.NewView(Values, 0)
	require.NoError(t, err)
	defer v.Close()
	write(60)
	eventually(t, "the appends", func() bool { return pu.EndOffset() == b.End() })
	eventually(t, "the open view to grow", func() bool { n, err := v.Size(); return err == nil && n == int64(len(text(0))) })
	got, _ = viewText(t, pc, 0)
	require.Equal(t, text(0)[:len(text(0))-len(text(20))], got, "read_committed stops at the high watermark")
	require.NoError(t, b.Checkpoint(b.End()))
	eventually(t, "the high watermark", func() bool { return pc.HighWatermark() == b.End() })
	got, err = viewText(t, pc, 0)
	require.NoError(t, err)
	require.Equal(t, text(0), got)
	require.Greater(t, len(pu.segments()), 3, "rolled")

	// Retention deletes the oldest segments: the log start moves.
	first := pu.segments()[1].base
	require.NoError(t, b.DeleteOldest(false))
	eventually(t, "retention", func() bool { return pu.StartOffset() == first })
	got, err = viewText(t, pu, first)
	require.NoError(t, err)
	require.Equal(t, text(int(first)), got)

	// The cleaner replaces a segment with a copy that keeps every other
	// batch: new readers read the copy, the partition goes on.
	dropped := map[record.Offset]bool{}
	require.NoError(t, b.Clean(0, func(bt *record.Batch) bool {
		dropped[bt.BaseOffset] = bt.BaseOffset%2 == 1
		return !dropped[bt.BaseOffset]
	}))
	var cleaned strings.Builder
	for i := int(first); i < len(want); i++ {
		if !dropped[record.Offset(i)] {
			cleaned.WriteString(want[i] + "\n")
		}
	}
	eventually(t, "the replaced segment", func() bool {
		got, err := viewText(t, pu, first)
		return err == nil && got == cleaned.String()
	})

	// A truncation: readers that were shown records past the cut get
	// ErrDeleted, those that were not go on, new ones read what the broker
	// writes after it.
	end := b.End()
	cut := end - 5
	old, err := pu.NewView(Values, cut)
	require.NoError(t, err)
	defer old.Close()
	n, err := old.Size()
	require.NoError(t, err)
	require.Equal(t, int64(len(text(int(cut)))), n, "shown the records past the cut")
	before, err := pu.NewView(Values, cut)
	require.NoError(t, err)
	defer before.Close()
	require.NoError(t, b.Truncate(cut))
	want = want[:cut]
	write(3)
	eventually(t, "the truncation", func() bool { return pu.EndOffset() == b.End() })
	_, err = old.Size()
	require.ErrorIs(t, err, ErrDeleted)
	got, err = viewText(t, pu, cut)
	require.NoError(t, err)
	require.Equal(t, text(int(cut)), got)
	n, err = before.Size()
	require.NoError(t, err)
	require.Equal(t, int64(len(got)), n, "a view shown nothing past the cut goes on with what follows it")
}

// TestFollowTransactions: a read_committed view of a followed broker ends
// at the open transaction, and grows past it once its marker and the high
// watermark arrive; aborted records never show.
func TestFollowTransactions(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Create(dir, "f", 0, broker.Options{SegmentBytes: 400})
	require.NoError(t, err)
	w := func(pid int64, txnl bool, v string) {
		_, err := b.Write(pid, txnl, v)
		require.NoError(t, err)
	}
	w(-1, false, "a")
	require.NoError(t, b.Checkpoint(b.End()))
	_, p := followed(t, dir, ReadCommitted)
	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	defer v.Close()
	size := func() int64 { n, err := v.Size(); require.NoError(t, err); return n }
	require.Equal(t, int64(2), size())

	w(1, true, "t1")
	w(-1, false, "b")
	w(2, true, "t2")
	_, err = b.Marker(2, record.ControlAbort)
	require.NoError(t, err)
	w(-1, false, "c")
	require.NoError(t, b.Checkpoint(b.End()))
	eventually(t, "the high watermark", func() bool { return p.HighWatermark() == b.End() })
	require.Equal(t, record.Offset(1), p.LatestOffset(), "the open transaction holds the view back")
	require.Equal(t, int64(2), size())

	_, err = b.Marker(1, record.ControlCommit)
	require.NoError(t, err)
	for i := 0; i < 20; i++ { // over a few segments
		w(-1, false, fmt.Sprintf("d%d", i))
	}
	require.NoError(t, b.Checkpoint(b.End()))
	eventually(t, "the commit", func() bool { return p.LatestOffset() == b.End() })
	want := "a\nt1\nb\nc\n"
	for i := 0; i < 20; i++ {
		want += fmt.Sprintf("d%d\n", i)
	}
	eventually(t, "the view to grow", func() bool { return size() == int64(len(want)) })
	got, err := viewText(t, p, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// TestFollowCheckLagging: Check of a followed log whose follower has not
// yet learnt what the broker did since, which is every followed log some of
// the time (the follower refreshes a partition at most every followMinGap).
// The broker appends the .log bytes and then the index entry pointing at
// them (Kafka's order), so the active segment's index file can hold entries
// past the log end the follower knows: not corruption, and not read by a
// follower, which indexes in memory. A cleaner's copy or a truncation the
// follower has not seen is not either: Check catches up first. Holding
// p.followMu keeps the follower behind, as a busy machine does for a while.
func TestFollowCheckLagging(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Create(dir, "f", 0, broker.Options{SegmentBytes: 1024, IndexInterval: 100})
	require.NoError(t, err)
	var want []string
	write := func(n int) {
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("r%d %s", len(want), strings.Repeat("x", len(want)%30))
			_, err := b.Write(-1, false, v)
			require.NoError(t, err)
			want = append(want, v)
		}
	}
	write(40)
	_, p := followed(t, dir, ReadUncommitted)
	segs := p.segments()
	require.Greater(t, len(segs), 2)
	checkSegments := func() error {
		var errs []error
		fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
		for i, s := range p.segments() {
			_, err := s.check(fail, i < len(p.segments())-1, p.gapless(), nil)
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}

	// Appends to the active segment with index entries the follower has
	// not published.
	p.followMu.Lock()
	known := p.EndOffset()
	write(3)
	err = checkSegments()
	end := p.EndOffset()
	p.followMu.Unlock()
	require.NoError(t, err, "index entries of bytes the follower has not published yet")
	require.Equal(t, known, end, "the follower published nothing meanwhile")

	// A cleaner's copy of the oldest segment, and a truncation into a
	// sealed one followed by new records, all unseen when Check starts.
	p.followMu.Lock()
	dropped := map[record.Offset]bool{}
	err = b.Clean(0, func(bt *record.Batch) bool {
		dropped[bt.BaseOffset] = bt.BaseOffset%2 == 1
		return !dropped[bt.BaseOffset]
	})
	cut := segs[len(segs)-2].base + 2
	if err == nil {
		err = b.Truncate(cut)
	}
	if err == nil {
		want = want[:cut]
		write(3)
	}
	p.followMu.Unlock()
	require.NoError(t, err)
	require.NoError(t, p.Check())
	require.Equal(t, b.End(), p.EndOffset(), "Check caught up")
	var kept strings.Builder
	for i, v := range want {
		if !dropped[record.Offset(i)] {
			kept.WriteString(v + "\n")
		}
	}
	got, err := viewText(t, p, 0)
	require.NoError(t, err)
	require.Equal(t, kept.String(), got)
}
