package storage

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// Adversarial tests of what a topic's delete (and its re-creation under the
// same name) leaves for the holders of its old handles: Readers, Views,
// segments they pin, Topic handles, delayed deletes. See
// retention_adv35_test.go for retention raced against the same.

// adv35Logs collects what a Log logs at Warn and above, and whether each
// "deleted segment by retention" it logs is true when logged: the
// segment's .log is renamed *.deleted in the partition's folder.
type adv35Logs struct {
	dir   string
	mu    sync.Mutex
	warns []string
	false []string
}

func (h *adv35Logs) Enabled(context.Context, slog.Level) bool { return true }
func (h *adv35Logs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *adv35Logs) WithGroup(string) slog.Handler            { return h }

func (h *adv35Logs) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	line := fmt.Sprintf("%s %s %v", r.Level, r.Message, attrs)
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Level >= slog.LevelWarn {
		h.warns = append(h.warns, line)
	}
	if r.Message == "deleted segment by retention" {
		var base int64
		_, _ = fmt.Sscan(attrs["base"], &base)
		p := filepath.Join(h.dir, attrs["partition"], layout.SegmentFileName(record.Offset(base), layout.LogSuffix)+layout.DeletedSuffix)
		if _, err := os.Stat(p); err != nil {
			h.false = append(h.false, line+": "+err.Error())
		}
	}
	return nil
}

func (h *adv35Logs) check(t *testing.T, what string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.warns, "%s: warnings or errors logged", what)
	require.Empty(t, h.false, "%s: a deletion logged that did not happen there", what)
}

// adv35Files describes every file of the folders of topic t's partitions
// 0 to n-1 by inode, size and content.
func adv35Files(t *testing.T, dir string, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for id := 0; id < n; id++ {
		d := filepath.Join(dir, layout.PartitionDirName("t", id))
		for _, name := range mustReadDir(t, d) {
			path := filepath.Join(d, name)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			st, err := os.Stat(path)
			require.NoError(t, err)
			out[filepath.Join(filepath.Base(d), name)] = fmt.Sprintf("ino %d size %d sha %x", st.Sys().(*syscall.Stat_t).Ino, st.Size(), sha256.Sum256(b))
		}
	}
	return out
}

// adv35ReadView reads v to its end and returns the records it rendered and
// the error it ended with.
func adv35ReadView(v *View) ([]string, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := v.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if err != nil {
			return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"), err
		}
	}
}

// adv35Append appends n records "prefix-i", one batch each, to every
// partition of top.
func adv35Append(t *testing.T, top *Topic, n int, prefix string) {
	t.Helper()
	for _, p := range top.Partitions() {
		for i := 0; i < n; i++ {
			_, err := p.Append([]Record{{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}})
			require.NoError(t, err)
		}
	}
}

// adv35NewCfg are the new topic's settings: the old one's segment size,
// so that its segments have the old ones' names, and no retention.
func adv35NewCfg() Overrides { return small("segment.bytes=300", "retention.ms=-1") }

// adv35CheckOld requires the records an old reader returned to be the old
// topic's, in order from offset 0, and its end an error.
func adv35CheckOld(t *testing.T, got []string, end error, what string) {
	t.Helper()
	for i, r := range got {
		require.True(t, r == fmt.Sprintf("old-%d", i) || r == fmt.Sprintf("%d:old-%d", i, i), "%s: record %d is %q", what, i, r)
	}
	require.Error(t, end, "%s: ends without an error after %d records", what, len(got))
	require.NotErrorIs(t, end, io.EOF, "%s: ends as if the old topic ended there", what)
}

// adv35ReadReader reads r to its first error and returns the records
// ("offset:value") and the error.
func adv35ReadReader(r *Reader) ([]string, error) {
	var got []string
	for {
		rec, err := r.Next()
		if err != nil {
			return got, err
		}
		got = append(got, fmt.Sprintf("%d:%s", rec.Offset, rec.Value))
	}
}

// adv35WithTimeout runs fn, which asserts nothing itself, failing the test
// if it does not return within 5 s (a hang).
func adv35WithTimeout(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s hangs", what)
	}
}

// TestAdv35ReaderEndsWhenTopicGoes: a Reader of a partition whose topic is
// deleted (created again or not), or whose Log is closed, ends with
// ErrClosed once it has read the segment it holds: the segments after it
// can no longer be pinned, and it must not wait for them for ever
// (before, it spun on them, a CPU at 100 %, and never returned).
func TestAdv35ReaderEndsWhenTopicGoes(t *testing.T) {
	for _, how := range []string{"delete", "recreate", "close"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			l := reopen(t, dir, false)
			top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.ms=-1"))
			require.NoError(t, err)
			adv35Append(t, top, 20, "old")
			p, _ := top.Partition(0)
			require.Greater(t, len(p.SegmentBases()), 2)
			r, err := p.NewReader(0)
			require.NoError(t, err)
			defer r.Close()
			switch how {
			case "delete":
				require.NoError(t, l.DeleteTopic("t"))
			case "recreate":
				require.NoError(t, l.DeleteTopic("t"))
				top, err := l.CreateTopic("t", 1, adv35NewCfg())
				require.NoError(t, err)
				adv35Append(t, top, 10, "new")
			case "close":
				require.NoError(t, l.Close())
			}
			var got []string
			var end error
			adv35WithTimeout(t, "the Reader", func() { got, end = adv35ReadReader(r) })
			adv35CheckOld(t, got, end, "Reader")
			require.ErrorIs(t, end, ErrClosed)
			require.Less(t, len(got), 20, "it read segments nobody pinned")
			require.NoError(t, l.Close())
		})
	}
}

// TestAdv35PinnedSegmentLeavesNewTopicAlone: a segment of a deleted topic
// that a reader still holds (here a Reader that read into it, after a
// clean reopen, so that its indexes were never opened) must never open,
// rebuild or remove files by its names: they are the files of the topic
// created again under the name, whose segments have the same base
// offsets. Asked for its index (a Seek inside it, a lookup by time, a
// View from it), it indexes its own open log in memory. Before, the
// Seek's first use of the index opened the new topic's index by name,
// found it wrong for the old log, and rebuilt it from the new topic's
// .log cut at the old segment's size, replacing the new topic's index
// files; the View read the new topic's view-index sidecar; both logged
// errors about bad files that were not bad.
func TestAdv35PinnedSegmentLeavesNewTopicAlone(t *testing.T) {
	for _, how := range []string{"seek", "time", "view"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			c := newClock()
			logs := &adv35Logs{dir: dir}
			opts := Options{Logger: slog.New(logs), RetentionCheckInterval: -1, Now: c.Now}
			l, err := Open(dir, opts)
			require.NoError(t, err)
			cfg := small("segment.bytes=300", "index.interval.bytes=0", "retention.ms=-1")
			top, err := l.CreateTopic("t", 1, cfg)
			require.NoError(t, err)
			adv35Append(t, top, 20, "old")
			require.NoError(t, l.Close())

			l, err = Open(dir, opts)
			require.NoError(t, err)
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			bases := p.SegmentBases()
			require.Greater(t, len(bases), 2)
			r, err := p.NewReader(0)
			require.NoError(t, err)
			defer r.Close()
			for {
				rec, err := r.Next()
				require.NoError(t, err)
				if rec.Offset == bases[1] {
					break // r holds the second segment, its index unused
				}
			}

			c.Advance(time.Hour)
			require.NoError(t, l.DeleteTopic("t"))
			top, err = l.CreateTopic("t", 1, small("segment.bytes=300", "index.interval.bytes=0", "retention.ms=-1"))
			require.NoError(t, err)
			np, _ := top.Partition(0)
			for i := 0; i < 20; i++ {
				_, err := np.Append([]Record{{Value: []byte(fmt.Sprintf("new-%d-%s", i, strings.Repeat("x", i%3)))}})
				require.NoError(t, err)
			}
			require.NoError(t, np.Sync())
			require.Contains(t, np.SegmentBases(), bases[1], "a new segment has the held one's name")
			want := readAll(t, np, 0)
			files := adv35Files(t, dir, 1)

			switch how {
			case "seek":
				require.NoError(t, r.Seek(bases[1]+1))
				rec, err := r.Next()
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("old-%d", bases[1]+1), string(rec.Value))
			case "time":
				off, err := p.OffsetForTime(0)
				if err == nil {
					require.Less(t, off, record.Offset(20), "an offset of the old topic")
				}
			case "view":
				v, err := p.NewView(Values, bases[1]+1)
				require.NoError(t, err)
				got, end := adv35ReadView(v)
				require.NoError(t, v.Close())
				require.Error(t, end)
				require.NotEmpty(t, got)
				for i, g := range got {
					require.Equal(t, fmt.Sprintf("old-%d", int(bases[1])+1+i), g)
				}
			}
			require.Equal(t, files, adv35Files(t, dir, 1), "the new topic's files changed")
			require.Equal(t, want, readAll(t, np, 0))
			logs.check(t, how)
			require.NoError(t, l.Close())
			l, err = Open(dir, opts)
			require.NoError(t, err)
			np, err = l.Partition("t", 0)
			require.NoError(t, err)
			require.Equal(t, want, readAll(t, np, 0))
			require.NoError(t, l.Check())
			require.NoError(t, l.Close())
			logs.check(t, how+", reopened")
		})
	}
}

// TestAdv35StaleTopicHandleSetConfig: SetConfig through a handle of a
// topic that was deleted fails with ErrNoTopic and writes nothing; after
// Close it fails with ErrClosed. Before, it wrote the settings file by
// the topic's name, which is the settings of a topic created again under
// it: at the next open the new topic took the old handle's retention.ms,
// and retention deleted its records.
func TestAdv35StaleTopicHandleSetConfig(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprint("recreate=", recreate), func(t *testing.T) {
			dir := t.TempDir()
			l := reopen(t, dir, false)
			old, err := l.CreateTopic("t", 1, small("retention.ms=-1"))
			require.NoError(t, err)
			require.NoError(t, l.DeleteTopic("t"))
			if recreate {
				top, err := l.CreateTopic("t", 1, adv35NewCfg())
				require.NoError(t, err)
				adv35Append(t, top, 10, "new")
			}
			before := mustReadDir(t, dir)
			require.ErrorIs(t, old.SetConfig(small("retention.ms=1")), ErrNoTopic)
			require.Equal(t, before, mustReadDir(t, dir))
			require.NoError(t, l.Close())
			require.ErrorIs(t, old.SetConfig(small("retention.ms=1")), ErrClosed)

			c := newClock()
			c.Advance(365 * 24 * time.Hour)
			l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, Now: c.Now})
			require.NoError(t, err)
			defer l.Close()
			if !recreate {
				require.Empty(t, l.Topics())
				require.NotContains(t, mustReadDir(t, dir), "t"+layout.TopicConfigSuffix)
				return
			}
			top, err := l.Topic("t")
			require.NoError(t, err)
			require.Equal(t, int64(-1), top.Config().RetentionMs, "the new topic's retention.ms")
			n, err := l.EnforceRetention()
			require.NoError(t, err)
			require.Zero(t, n)
			p, _ := top.Partition(0)
			require.Len(t, readAll(t, p, 0), 10)
		})
	}
}

// adv35Pending returns the delayed jobs (unlinks of *.deleted files) l
// has scheduled and not run.
func adv35Pending(l *Log) map[*delayedJob]bool {
	l.delMu.Lock()
	defer l.delMu.Unlock()
	m := map[*delayedJob]bool{}
	for j := range l.pending {
		m[j] = true
	}
	return m
}

// adv35DeletedFiles lists the *.deleted files of dir.
func adv35DeletedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, name := range mustReadDir(t, dir) {
		if strings.HasSuffix(name, layout.DeletedSuffix) {
			out = append(out, name)
		}
	}
	return out
}

// TestAdv35DelayedDeleteSparesRecreatedTopic: the delayed unlink of the
// *.deleted files of a topic's segments (file.delete.delay.ms after
// retention, AdvanceStart or ResetFetched renamed them) that comes due
// after the topic was deleted and created again must not unlink the new
// topic's files: its own retention renames its segments of the same base
// offsets to the same *.deleted names, whose readers are promised the
// full delay. The jobs are run by hand, old ones first, at once; before,
// the old topic's jobs unlinked every *.deleted file of the new one.
func TestAdv35DelayedDeleteSparesRecreatedTopic(t *testing.T) {
	cfg := func(kv ...string) Overrides {
		return small(append([]string{"segment.bytes=300", "file.delete.delay.ms=3600000"}, kv...)...)
	}
	for _, how := range []string{"retention", "records", "reset"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			logs := &adv35Logs{dir: dir}
			l, err := Open(dir, Options{Logger: slog.New(logs), RetentionCheckInterval: -1, Gaps: how == "reset"})
			require.NoError(t, err)
			defer l.Close()
			top, err := l.CreateTopic("t", 1, cfg("retention.bytes=0", "retention.ms=-1"))
			require.NoError(t, err)
			p, _ := top.Partition(0)
			switch how {
			case "retention":
				adv35Append(t, top, 10, "old")
				n, err := l.EnforceRetention()
				require.NoError(t, err)
				require.Greater(t, n, 1)
			case "records":
				adv35Append(t, top, 10, "old")
				_, err := p.AdvanceStart(p.EndOffset())
				require.NoError(t, err)
			case "reset":
				require.NoError(t, p.ResetFetched(0, [][]byte{leaderBatch(t, 0, 2, "old")}))
				require.NoError(t, p.ResetFetched(0, [][]byte{leaderBatch(t, 0, 2, "old")}))
			}
			oldJobs := adv35Pending(l)
			require.NotEmpty(t, oldJobs)

			require.NoError(t, l.DeleteTopic("t"))
			top, err = l.CreateTopic("t", 1, cfg("retention.bytes=0", "retention.ms=-1"))
			require.NoError(t, err)
			adv35Append(t, top, 10, "new")
			n, err := l.EnforceRetention()
			require.NoError(t, err)
			require.Greater(t, n, 1)
			deleted := adv35DeletedFiles(t, filepath.Join(dir, "t-0"))
			require.Contains(t, deleted, layout.SegmentFileName(0, layout.LogSuffix)+layout.DeletedSuffix)

			for j := range oldJobs {
				l.runJob(j)
			}
			require.Equal(t, deleted, adv35DeletedFiles(t, filepath.Join(dir, "t-0")), "the old topic's delayed deletes unlinked the new one's files")
			for j := range adv35Pending(l) {
				l.runJob(j)
			}
			require.Empty(t, adv35DeletedFiles(t, filepath.Join(dir, "t-0")), "the new topic's own delayed deletes")
			p, err = l.Partition("t", 0)
			require.NoError(t, err)
			require.Empty(t, readAll(t, p, p.StartOffset()))
			require.Equal(t, record.Offset(10), p.EndOffset())
			logs.check(t, how)
		})
	}
}

// TestAdv35FlushOfDeletedPartition: Sync of a partition whose topic was
// deleted, with its folder still to sync, fails with ErrClosed (which the
// background flusher does not log) and syncs nothing by the folder's name.
// The state is the one retention leaves when its renames to *.deleted
// land after the close that the delete begins with has flushed, and a
// roll (retention rolls a condemned active segment) asked the background
// flusher for a flush that comes after the delete: before, that flush
// synced the folder by its name, which was gone ("flush after roll ...
// no such file or directory", logged as an error) or a topic's created
// again. TestAdv35RetentionRecreateStorm meets it for real.
func TestAdv35FlushOfDeletedPartition(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprint("recreate=", recreate), func(t *testing.T) {
			dir := t.TempDir()
			l := reopen(t, dir, false)
			defer l.Close()
			top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.ms=-1"))
			require.NoError(t, err)
			adv35Append(t, top, 10, "old")
			p, _ := top.Partition(0)
			require.NoError(t, l.DeleteTopic("t"))
			if recreate {
				_, err := l.CreateTopic("t", 1, adv35NewCfg())
				require.NoError(t, err)
			}
			p.dirDirty.Store(true) // retention's renames after close's flush
			require.ErrorIs(t, p.Sync(), ErrClosed)
			require.NoError(t, l.Sync())
		})
	}
}

// TestAdv35ReadCommittedViewOfDeletedTopic: a read_committed View opened
// on a deleted topic's partition (its first segment still held by a
// Reader, so that the View can pin it) replays producer state without
// listing the partition's folder by name, which is gone or a topic's
// created again: it shows the old records and ends with an error, and
// nothing is logged. Before, it listed the folder for producer snapshots
// and .txnindex files and warned "reading producer snapshots ... no such
// file or directory" (TestAdv35RetentionRecreateStorm met it).
func TestAdv35ReadCommittedViewOfDeletedTopic(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprint("recreate=", recreate), func(t *testing.T) {
			dir := t.TempDir()
			logs := &adv35Logs{dir: dir}
			l, err := Open(dir, Options{Logger: slog.New(logs), RetentionCheckInterval: -1})
			require.NoError(t, err)
			defer l.Close()
			top, err := l.CreateTopic("t", 1, small("segment.bytes=300", "retention.ms=-1"))
			require.NoError(t, err)
			adv35Append(t, top, 10, "old")
			p, _ := top.Partition(0)
			r, err := p.NewReader(0)
			require.NoError(t, err)
			defer r.Close()
			require.NoError(t, l.DeleteTopic("t"))
			if recreate {
				top, err := l.CreateTopic("t", 1, adv35NewCfg())
				require.NoError(t, err)
				adv35Append(t, top, 10, "new")
			}
			v, err := p.NewView(Values, 0)
			require.NoError(t, err)
			got, end := adv35ReadView(v)
			require.NoError(t, v.Close())
			adv35CheckOld(t, got, end, "View")
			logs.check(t, "View")
		})
	}
}

// TestAdv35PrependAfterRecreate: a follower copy's Prepend begun on a
// partition whose topic is then deleted and created again must not make
// or write its segments in the partition's folder by name: that is the
// new topic's folder, and a segment made there is created with O_TRUNC
// over the new topic's segment of the same base offset. Append and Commit
// fail (ErrClosed) and the new topic's files are untouched, its synced
// records whole, live and after a crash and a reopen. Before, an Append
// after the re-creation emptied the new topic's first segment and put the
// old topic's batches in it, which a reopen then served as the new
// topic's; a Commit with nothing appended did the same with an empty
// segment; a Commit of segments appended before wrote their view-index
// sidecar into the new topic's folder.
func TestAdv35PrependAfterRecreate(t *testing.T) {
	for _, at := range []string{"append", "commit", "append-before"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, Gaps: true})
			require.NoError(t, err)
			top, err := l.CreateTopic("t", 1, nil)
			require.NoError(t, err)
			p, _ := top.Partition(0)
			require.NoError(t, p.ResetFetched(10, [][]byte{leaderBatch(t, 10, 2, "old")}))
			pp, err := p.BeginPrepend(0)
			require.NoError(t, err)
			if at == "append-before" {
				require.NoError(t, pp.Append([][]byte{leaderBatch(t, 0, 2, "old")}))
			}

			require.NoError(t, adv33Replace(l, 10)) // t again: "new-0" to "new-9" from offset 0, synced
			np, err := l.Partition("t", 0)
			require.NoError(t, err)
			want := readAll(t, np, 0)
			files := adv35Files(t, dir, 1)
			if at == "append" {
				require.ErrorIs(t, pp.Append([][]byte{leaderBatch(t, 0, 2, "old")}), ErrClosed)
			}
			require.Error(t, pp.Commit())
			require.Equal(t, files, adv35Files(t, dir, 1), "the new topic's files changed")
			require.Equal(t, want, readAll(t, np, 0))
			crashed := t.TempDir()
			copyDir(t, dir, crashed)
			require.NoError(t, l.Close())
			adv33CheckNew(t, crashed, 10)
			adv33CheckNew(t, dir, 10)
		})
	}
}

// TestAdv35NoCheckpointAfterClose: once Close has written its last
// checkpoints and let go of the directory, the next process may take it;
// a Sync through the closed log (a handle a caller kept) must write
// nothing there, or it would put this log's checkpoints over that
// process's.
func TestAdv35NoCheckpointAfterClose(t *testing.T) {
	dir := t.TempDir()
	l := reopen(t, dir, false)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	adv35Append(t, top, 10, "v")
	require.NoError(t, l.Close())

	// The next process's checkpoints, standing in for whatever it wrote.
	var theirs []string
	for _, name := range []string{"recovery-point-offset-checkpoint", "log-start-offset-checkpoint"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("0\n0\n"), 0o600))
		theirs = append(theirs, p)
	}
	require.ErrorIs(t, l.Sync(), ErrClosed)
	for _, p := range theirs {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, "0\n0\n", string(b), "%s written after Close", filepath.Base(p))
	}
}
