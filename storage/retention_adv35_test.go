package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// Adversarial tests of retention (retention.bytes, retention.ms and
// AdvanceStart, the DeleteRecords of a follower copy) against a delete and
// re-creation of the topic it works on, landing at every point of its
// sequence: before it detaches the condemned segments, between that and the
// checkpoint write, inside the checkpoint write, between it and the
// renames to *.deleted, between the renames of one segment, and between
// segments and partitions (the delayed unlinks that come after are
// TestAdv35DelayedDeleteSparesRecreatedTopic's). Promises
// (SPEC §6, README, doc.go's Retention): nothing of the old topic lands
// in, removes or truncates anything of the new one; the new one takes
// nothing from the old one's checkpoint entries or settings, after a
// clean close and after a crash; retention returns no error and logs
// nothing false for segments that went with the delete; nothing panics
// or hangs; readers of the old topic end with its records and an error,
// never the new topic's records.

// adv35Gate is a file system that pauses, once, the first operation the
// armed matcher accepts (an open, a rename, or the retention hook's stage,
// op "hook"), until the test lets it go.
type adv35Gate struct {
	vfs.FS
	mu      sync.Mutex
	match   func(op, from, to string) bool
	reached chan struct{}
	release chan struct{}
}

func newAdv35Gate() *adv35Gate {
	return &adv35Gate{FS: vfs.Default, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *adv35Gate) arm(match func(op, from, to string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match = match
}

func (g *adv35Gate) hit(op, from, to string) {
	g.mu.Lock()
	m := g.match
	if m != nil && m(op, from, to) {
		g.match = nil
	} else {
		m = nil
	}
	g.mu.Unlock()
	if m != nil {
		close(g.reached)
		<-g.release
	}
}

func (g *adv35Gate) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	g.hit("open", name, "")
	return g.FS.OpenFile(name, flag, perm)
}

func (g *adv35Gate) Rename(from, to string) error {
	g.hit("rename", from, to)
	return g.FS.Rename(from, to)
}

// adv35CheckNew requires topic t of l to be the new one: n partitions,
// each holding exactly records "new-0" to "new-9" from offset 0, with the
// new topic's settings, and no segment of it taken for deleted by
// retention when l opened.
func adv35CheckNew(t *testing.T, l *Log, n int, what string) {
	t.Helper()
	top, err := l.Topic("t")
	require.NoError(t, err, what)
	require.Len(t, top.Partitions(), n, "%s: partitions", what)
	require.Equal(t, int64(-1), top.Config().RetentionMs, "%s: the new topic's retention.ms", what)
	require.Equal(t, int64(-1), top.Config().RetentionBytes, "%s: the new topic's retention.bytes", what)
	want := make([]string, 10)
	for i := range want {
		want[i] = fmt.Sprintf("%d:new-%d", i, i)
	}
	for _, p := range top.Partitions() {
		require.Equal(t, record.Offset(0), p.StartOffset(), "%s: %s log start", what, p)
		require.Equal(t, record.Offset(10), p.EndOffset(), "%s: %s log end", what, p)
		require.Equal(t, want, readAll(t, p, 0), "%s: %s", what, p)
		for _, name := range mustReadDir(t, p.Dir()) {
			require.False(t, strings.HasSuffix(name, layout.DeletedSuffix), "%s: %s holds %s", what, p, name)
		}
	}
	if rep := l.RecoveryReport(); rep != nil {
		for _, pr := range rep.Partitions {
			if strings.HasPrefix(filepath.Base(pr.Dir), "t-") {
				require.Empty(t, pr.Expired, "%s: %s: segments taken for deleted by retention", what, pr.Dir)
				require.Empty(t, pr.Dropped, "%s: %s: segments dropped", what, pr.Dir)
			}
		}
	}
}

// adv35CheckReopen opens dir (a crash copy or a cleanly closed directory)
// and requires the new topic there, whole, its checkpoints its own, and
// retention with a clock far ahead to leave it alone (its settings are
// not the old one's).
func adv35CheckReopen(t *testing.T, dir string, n int, what string) {
	t.Helper()
	c := newClock()
	c.Advance(365 * 24 * time.Hour)
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, Now: c.Now})
	require.NoError(t, err, what)
	defer func() { require.NoError(t, l.Close(), what) }()
	adv35CheckNew(t, l, n, what)
	deleted, err := l.EnforceRetention()
	require.NoError(t, err, what)
	require.Zero(t, deleted, "%s: retention of the new topic acted", what)
	adv35CheckNew(t, l, n, what+" after retention")
	require.NoError(t, l.Check(), what)
}

// adv35CheckCheckpoints requires the checkpoint files of dir to hold, for
// topic t, exactly the new topic's n partitions, each at log start 0 and
// recovery point 10.
func adv35CheckCheckpoints(t *testing.T, dir string, n int, what string) {
	t.Helper()
	for _, c := range []struct {
		file string
		want record.Offset
	}{{layout.LogStartFile, 0}, {layout.RecoveryPointFile, 10}} {
		m, err := recovery.ReadCheckpoint(vfs.Default, filepath.Join(dir, c.file))
		require.NoError(t, err, what)
		got := map[int]record.Offset{}
		for tp, off := range m {
			if tp.Topic == "t" {
				got[tp.Partition] = off
			}
		}
		want := map[int]record.Offset{}
		for id := 0; id < n; id++ {
			want[id] = c.want
		}
		require.Equal(t, want, got, "%s: %s", what, c.file)
	}
}

// TestAdv35RetentionRacesRecreate runs retention on topic t (two
// partitions, segments of a few records, reopened cleanly so that its
// indexes are opened lazily), pauses it at each point of its sequence,
// deletes t and creates it again with one or three partitions and the
// same segment names meanwhile, appends and syncs, lets retention go on,
// and then checks every promise above. A Reader and a View of the old
// t-0, opened before, are read to their end; the Reader holds a segment
// whose index it never used.
func TestAdv35RetentionRacesRecreate(t *testing.T) {
	type point struct {
		name string
		// match is the pause; blocks says the delete waits for the paused
		// retention ("all"), or only the create does ("create").
		match  func(dir string, bases []record.Offset) func(op, from, to string) bool
		blocks string
	}
	seg := func(id int, base record.Offset, suffix string) func(string) string {
		return func(dir string) string {
			return filepath.Join(dir, layout.PartitionDirName("t", id), layout.SegmentFileName(base, suffix))
		}
	}
	hook := func(stage string) func(string, []record.Offset) func(op, from, to string) bool {
		return func(string, []record.Offset) func(op, from, to string) bool {
			return func(op, from, _ string) bool { return op == "hook" && from == stage }
		}
	}
	renameFrom := func(path func(string, []record.Offset) string) func(string, []record.Offset) func(op, from, to string) bool {
		return func(dir string, bases []record.Offset) func(op, from, to string) bool {
			p := path(dir, bases)
			return func(op, from, _ string) bool { return op == "rename" && from == p }
		}
	}
	renameTo := func(file string) func(string, []record.Offset) func(op, from, to string) bool {
		return func(dir string, _ []record.Offset) func(op, from, to string) bool {
			p := filepath.Join(dir, file)
			return func(op, _, to string) bool { return op == "rename" && to == p }
		}
	}
	points := []point{
		{"listed", hook("listed"), ""},
		{"detached", hook("detached"), ""},
		{"checkpoint-open", func(dir string, _ []record.Offset) func(op, from, to string) bool {
			p := filepath.Join(dir, layout.LogStartFile+".tmp")
			return func(op, from, _ string) bool { return op == "open" && from == p }
		}, "create"},
		{"checkpoint-rename", renameTo(layout.LogStartFile), "create"},
		{"recovery-point-rename", renameTo(layout.RecoveryPointFile), "create"},
		{"first-log-rename", renameFrom(func(dir string, _ []record.Offset) string { return seg(0, 0, layout.LogSuffix)(dir) }), "all"},
		{"first-index-rename", renameFrom(func(dir string, _ []record.Offset) string { return seg(0, 0, layout.IndexSuffix)(dir) }), "all"},
		{"next-segment", renameFrom(func(dir string, b []record.Offset) string { return seg(0, b[1], layout.LogSuffix)(dir) }), "all"},
		{"next-partition", renameFrom(func(dir string, _ []record.Offset) string { return seg(1, 0, layout.LogSuffix)(dir) }), "all"},
	}
	modes := []struct {
		name string
		cfg  Overrides
		run  func(l *Log, c *clock, bases []record.Offset) error
	}{
		{"bytes", small("retention.bytes=0", "retention.ms=-1"), func(l *Log, _ *clock, _ []record.Offset) error {
			_, err := l.EnforceRetention()
			return err
		}},
		{"time", small("retention.ms=60000"), func(l *Log, c *clock, _ []record.Offset) error {
			c.Advance(time.Hour)
			_, err := l.EnforceRetention()
			return err
		}},
		{"records", small("retention.ms=-1"), func(l *Log, _ *clock, bases []record.Offset) error {
			p, err := l.Partition("t", 0)
			if err != nil {
				return err
			}
			_, err = p.AdvanceStart(bases[2])
			return err
		}},
	}
	for _, mode := range modes {
		for i, pt := range points {
			if mode.name == "records" && (pt.name == "listed" || pt.name == "detached" || pt.name == "next-partition") {
				continue // points of EnforceRetention only
			}
			newN := 1 + 2*(i%2) // one or three partitions, the old topic has two
			for _, end := range []string{"close", "power-loss"} {
				t.Run(fmt.Sprintf("%s/%s/%d/%s", mode.name, pt.name, newN, end), func(t *testing.T) {
					adv35RetentionRacesRecreate(t, mode.cfg, func(l *Log, c *clock, b []record.Offset) error { return mode.run(l, c, b) },
						pt.match, pt.blocks, newN, end == "power-loss", uint64(i))
				})
			}
		}
	}
}

// adv35RetentionRacesRecreate is one case of TestAdv35RetentionRacesRecreate.
// With powerLoss the log's file system is a crashfs.FS, and the case ends
// with a crash that keeps a random part (seed) of what was not synced,
// in place of the clean Close.
func adv35RetentionRacesRecreate(t *testing.T, cfg Overrides, retention func(*Log, *clock, []record.Offset) error,
	match func(string, []record.Offset) func(op, from, to string) bool, blocks string, newN int, powerLoss bool, seed uint64) {
	dir := shmTempDir(t)
	c := newClock()
	logs := &adv35Logs{dir: dir}
	g := newAdv35Gate()
	cfs := crashfs.New(vfs.Default)
	if powerLoss {
		g.FS = cfs
	}
	// No checkpoint by the background writer, whose clock the test moves.
	opts := Options{FS: g, Logger: slog.New(logs), RetentionCheckInterval: -1, Now: c.Now, CheckpointInterval: 1000 * time.Hour}
	l, err := Open(dir, opts)
	require.NoError(t, err)
	o := small("segment.bytes=300", "file.delete.delay.ms=3600000")
	for k, v := range cfg {
		o[k] = v
	}
	top, err := l.CreateTopic("t", 2, o)
	require.NoError(t, err)
	adv35Append(t, top, 20, "old")
	require.NoError(t, l.Close())

	l, err = Open(dir, opts)
	require.NoError(t, err)
	l.retentionHook = func(stage string) { g.hit("hook", stage, "") }
	p0, err := l.Partition("t", 0)
	require.NoError(t, err)
	bases := p0.SegmentBases()
	require.Greater(t, len(bases), 3)
	// The old readers: a Reader that read into t-0's second segment
	// (pinned without its index), and a View that pinned the first.
	r, err := p0.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	var readerGot []string
	for {
		rec, err := r.Next()
		require.NoError(t, err)
		readerGot = append(readerGot, fmt.Sprintf("%d:%s", rec.Offset, rec.Value))
		if rec.Offset == bases[1] {
			break
		}
	}
	v, err := p0.NewView(Values, 0)
	require.NoError(t, err)
	defer v.Close()

	g.arm(match(dir, bases))
	retDone := make(chan error, 1)
	go func() { retDone <- retention(l, c, bases) }()
	adv35WaitOrFail(t, g.reached, "retention's pause")

	deleted, created := make(chan error, 1), make(chan error, 1)
	go func() {
		err := l.DeleteTopic("t")
		deleted <- err
		if err != nil {
			created <- err
			return
		}
		top, err := l.CreateTopic("t", newN, adv35NewCfg())
		if err == nil {
			for _, p := range top.Partitions() {
				for i := 0; i < 10 && err == nil; i++ {
					_, err = p.Append([]Record{{Value: []byte(fmt.Sprintf("new-%d", i))}})
				}
				err = errors.Join(err, p.Sync())
			}
		}
		created <- err
	}()
	switch blocks {
	case "": // retention holds no lock there: the whole recreate goes through
		adv35Wait(t, deleted, "the delete")
		adv35Wait(t, created, "the create")
	case "create": // the delete goes through; the create waits for the checkpoint file
		adv35Wait(t, deleted, "the delete")
		// Room for the create to get as far as it can. Nothing depends
		// on it but how far the interleaving reaches: every outcome must
		// pass the checks below.
		time.Sleep(20 * time.Millisecond)
	default:
		time.Sleep(20 * time.Millisecond) // room for the delete to get as far as it can, as above
	}
	close(g.release)
	require.NoError(t, adv35Wait(t, retDone, "retention"), "retention returns an error for segments that went with the delete")
	if blocks != "" {
		if blocks == "all" {
			adv35Wait(t, deleted, "the delete")
		}
		adv35Wait(t, created, "the create")
	}
	files := adv35Files(t, dir, newN)

	// The old readers: the old records, then an error; a seek inside the
	// segment the Reader holds and a lookup by time use that segment's
	// index, which it never used before.
	var more []string
	var readerEnd, viewEnd error
	var viewGot []string
	adv35WithTimeout(t, "the old readers", func() {
		more, readerEnd = adv35ReadReader(r)
		if r.Seek(max(bases[1]+1, p0.StartOffset())) == nil {
			_, _ = r.Next()
		}
		_, _ = p0.OffsetForTime(0)
		viewGot, viewEnd = adv35ReadView(v)
	})
	adv35CheckOld(t, append(readerGot, more...), readerEnd, "old Reader")
	adv35CheckOld(t, viewGot, viewEnd, "old View")
	if err := p0.Sync(); err != nil {
		require.ErrorIs(t, err, ErrClosed, "Sync of the old partition")
	}

	n, err := l.EnforceRetention()
	require.NoError(t, err, "a later retention pass")
	require.Zero(t, n, "a later retention pass deleted segments of the new topic")
	require.Equal(t, files, adv35Files(t, dir, newN), "the new topic's files changed after it was created")
	adv35CheckNew(t, l, newN, "live")
	require.NoError(t, l.Check())
	if powerLoss {
		logs.check(t, "the race")
		require.NoError(t, cfs.Crash(crashfs.CrashConfig{Mode: crashfs.Reorder, Rand: rand.New(rand.NewPCG(seed, 35))}))
		_ = l.Close() // fails: the file system has crashed
		adv35CheckReopen(t, dir, newN, "after a power loss")
		adv35CheckReopen(t, dir, newN, "clean reopen after a power loss")
		return
	}
	crashed := shmTempDir(t) // what a kill -9 leaves now
	copyDir(t, dir, crashed)
	require.NoError(t, l.Sync())
	adv35CheckCheckpoints(t, dir, newN, "after Sync")
	synced := shmTempDir(t)
	copyDir(t, dir, synced)
	require.NoError(t, l.Close())
	logs.check(t, "the race")
	adv35CheckCheckpoints(t, dir, newN, "after Close")
	adv35CheckReopen(t, crashed, newN, "crash copy")
	adv35CheckReopen(t, synced, newN, "crash copy after Sync")
	adv35CheckReopen(t, dir, newN, "clean reopen")
	adv35CheckReopen(t, dir, newN, "second clean reopen")
}

func adv35WaitOrFail(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// adv35Wait waits at most 5 s for ch and returns what it gave, failing the
// test on an error of the delete or the create.
func adv35Wait(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		if what == "the delete" || what == "the create" {
			require.NoError(t, err, what)
		}
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s hangs", what)
		return nil
	}
}

// TestAdv35RetentionRecreateStorm runs, for a while, retention passes and
// AdvanceStart in a loop (retention.bytes=0, delayed unlinks of 0 to 3 ms,
// so that they come due in the middle of everything) against a loop that
// deletes topic t and creates it again, each incarnation k appending
// records "k-i", and Readers and Views of whatever incarnation they find.
// Promises: no deadlock, hang or panic; a reader of incarnation k returns
// records of k only, then an error or the end; no warning or error is
// logged; at the end the live
// incarnation holds only its own records, in a directory Check passes,
// and so does a copy of it reopened as after a kill -9.
func TestAdv35RetentionRecreateStorm(t *testing.T) {
	dir := shmTempDir(t)
	logs := &adv35Logs{dir: dir}
	l, err := Open(dir, Options{Logger: slog.New(logs), RetentionCheckInterval: -1})
	require.NoError(t, err)
	cfg := func(k int) Overrides {
		return small("segment.bytes=300", "retention.bytes=0", "retention.ms=-1", fmt.Sprintf("file.delete.delay.ms=%d", k%4))
	}
	incarnation := func(v []byte) string { s, _, _ := strings.Cut(string(v), "-"); return s }
	var mu sync.Mutex
	live := -1 // the incarnation of the live topic t, or -1
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	run := func(fn func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fn(i)
			}
		}()
	}
	run(func(i int) {
		if i > 0 {
			if err := l.DeleteTopic("t"); err != nil {
				fail("delete %d: %v", i-1, err)
			}
		}
		top, err := l.CreateTopic("t", 1+i%3, cfg(i))
		if err != nil {
			fail("create %d: %v", i, err)
			return
		}
		mu.Lock()
		live = i
		mu.Unlock()
		for _, p := range top.Partitions() {
			for j := 0; j < 8; j++ {
				if _, err := p.Append([]Record{{Value: []byte(fmt.Sprintf("%d-%d", i, j))}}); err != nil {
					fail("append %d: %v", i, err)
				}
			}
		}
	})
	run(func(i int) {
		if i%2 == 0 {
			if _, err := l.EnforceRetention(); err != nil {
				fail("retention: %v", err)
			}
			return
		}
		// DeleteRecords of a follower copy: what it gets for a partition
		// deleted meanwhile is ErrClosed.
		top, err := l.Topic("t")
		if err != nil {
			return
		}
		for _, p := range top.Partitions() {
			if _, err := p.AdvanceStart(max(p.EndOffset()-1, 0)); err != nil && !errors.Is(err, ErrClosed) {
				fail("AdvanceStart: %v", err)
			}
		}
	})
	run(func(int) {
		top, err := l.Topic("t")
		if err != nil {
			return
		}
		p, err := top.Partition(0)
		if err != nil {
			return
		}
		v, err := p.NewView(Values, p.StartOffset())
		if err != nil {
			return // retention or the delete got there first
		}
		defer v.Close()
		got, _ := adv35ReadView(v)
		var want string
		for _, g := range got {
			if g == "" {
				continue
			}
			if want == "" {
				want = incarnation([]byte(g))
			} else if incarnation([]byte(g)) != want {
				fail("a View of incarnation %s read %q", want, g)
				return
			}
		}
	})
	for w := 0; w < 2; w++ {
		run(func(int) {
			top, err := l.Topic("t")
			if err != nil {
				return
			}
			ps := top.Partitions()
			if len(ps) == 0 {
				return
			}
			p := ps[0]
			r, err := p.NewReader(p.StartOffset())
			if err != nil {
				return // retention or the delete got there first
			}
			defer r.Close()
			var want string
			for n := 0; n < 100; n++ {
				rec, err := r.Next()
				if err != nil {
					return
				}
				if want == "" {
					want = incarnation(rec.Value)
				} else if got := incarnation(rec.Value); got != want {
					fail("a reader of incarnation %s read %q", want, rec.Value)
					return
				}
			}
		})
	}
	// 1.5 s of storm, and more until the incarnations it needs were made:
	// a loaded machine under the race detector makes fewer in the time.
	// Their number is checked below.
	incarnations := func() int { mu.Lock(); defer mu.Unlock(); return live }
	for start := time.Now(); time.Since(start) < 1500*time.Millisecond ||
		incarnations() <= 5 && time.Since(start) < time.Minute; {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	adv35WithTimeout(t, "the storm's goroutines", wg.Wait)
	require.Empty(t, failures)
	logs.check(t, "the storm")
	require.Greater(t, live, 5, "incarnations")

	top, err := l.Topic("t")
	require.NoError(t, err)
	want := fmt.Sprint(live)
	check := func(top *Topic, what string) {
		for _, p := range top.Partitions() {
			r, err := p.NewReader(p.StartOffset())
			require.NoError(t, err, what)
			got, end := adv35ReadReader(r)
			r.Close()
			require.ErrorIs(t, end, io.EOF, what)
			for _, g := range got {
				_, v, _ := strings.Cut(g, ":")
				require.Equal(t, want, incarnation([]byte(v)), "%s: %s holds %s", what, p, g)
			}
		}
	}
	check(top, "live")
	require.NoError(t, l.Check())
	l.runPendingDeletes() // unlinks that come due during the copy would fail it
	crashed := shmTempDir(t)
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())
	logs.check(t, "close")
	for _, d := range []string{crashed, dir} {
		l, err := Open(d, Options{Logger: slog.New(logs), RetentionCheckInterval: -1})
		require.NoError(t, err)
		top, err := l.Topic("t")
		require.NoError(t, err)
		require.Len(t, top.Partitions(), 1+live%3)
		check(top, d)
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
	}
	logs.check(t, "reopen")
}
