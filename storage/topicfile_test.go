package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// TestLongTopicNames: every valid name works end to end, the longest
// (249 characters) included: created with settings and three partitions,
// appended to, reopened with its settings, deleted (the folder of a
// deleted partition has its topic cut short to fit), gone after a reopen.
func TestLongTopicNames(t *testing.T) {
	for _, n := range []int{200, 213, 214, 238, 239, 249} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			name := strings.Repeat("n", n-4) + "._-9"
			l := reopen(t, dir, false)
			top, err := l.CreateTopic(name, 3, small("retention.ms=-1"))
			require.NoError(t, err)
			for _, p := range top.Partitions() {
				_, err := p.Append([]Record{{Value: []byte(fmt.Sprint("p", p.ID()))}})
				require.NoError(t, err)
			}
			require.NoError(t, l.Close())

			l = reopen(t, dir, false)
			top, err = l.Topic(name)
			require.NoError(t, err)
			require.Equal(t, int64(-1), top.Config().RetentionMs)
			p, err := top.Partition(2)
			require.NoError(t, err)
			require.Equal(t, []string{"0:p2"}, readAll(t, p, 0))
			_, err = top.AddPartition(3)
			require.NoError(t, err)
			require.NoError(t, l.DeleteTopic(name))
			require.Empty(t, l.Topics())
			require.NoError(t, l.Close())
			l = openLog(t, dir, Options{})
			require.Empty(t, l.Topics())
			for _, e := range mustReadDir(t, dir) {
				require.False(t, strings.HasPrefix(e, "nnnn"), "left behind: %s", e)
			}
		})
	}
}

// reopen opens dir for a test that closes it itself.
func reopen(t *testing.T, dir string, readOnly bool) *Log {
	t.Helper()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1, ReadOnly: readOnly})
	require.NoError(t, err)
	return l
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

// TestTopicNameCollision: a name that is an existing one's with '.' and
// '_' swapped is refused, as Kafka refuses it.
func TestTopicNameCollision(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	_, err := l.CreateTopic("a_b.c", 1, nil)
	require.NoError(t, err)
	for _, name := range []string{"a.b.c", "a_b_c", "a.b_c"} {
		_, err = l.CreateTopic(name, 1, nil)
		require.ErrorIs(t, err, ErrTopicCollides, name)
		require.ErrorContains(t, err, `collides with the existing topic "a_b.c"`)
	}
	require.Equal(t, []string{"a_b.c"}, l.Topics())
	_, err = l.CreateTopic("a-b.c", 1, nil)
	require.NoError(t, err)
}

// TestLegacySettingsFile: a settings file under the old name
// (<topic>.topic.properties) is read, also read-only, and renamed to the
// new one at the next writable open.
func TestLegacySettingsFile(t *testing.T) {
	dir := t.TempDir()
	l := reopen(t, dir, false)
	_, err := l.CreateTopic("t", 1, small("retention.ms=-1"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, os.Rename(filepath.Join(dir, "t.props"), filepath.Join(dir, "t.topic.properties")))

	ro := reopen(t, dir, true)
	top, err := ro.Topic("t")
	require.NoError(t, err)
	require.Equal(t, int64(-1), top.Config().RetentionMs)
	require.NoError(t, ro.Close())
	require.FileExists(t, filepath.Join(dir, "t.topic.properties"), "read-only changes nothing")

	l = openLog(t, dir, Options{})
	top, err = l.Topic("t")
	require.NoError(t, err)
	require.Equal(t, int64(-1), top.Config().RetentionMs)
	require.FileExists(t, filepath.Join(dir, "t.props"))
	require.NoFileExists(t, filepath.Join(dir, "t.topic.properties"))
}

// topicCrashSweep crashes op (CreateTopic or DeleteTopic of topic "doomed",
// three partitions) at each of its file system operations, keeping a
// random subset of what was not synced, and checks both a read-only and
// a writable open of what the crash left: "doomed" is whole or gone, the
// other topic untouched, and the writable open leaves no trace of a gone
// "doomed".
func topicCrashSweep(t *testing.T, src string, op func(*Log) error) {
	t.Helper()
	run := func(dir string, cfs *crashfs.FS, before *int) (*Log, error) {
		l, err := Open(dir, Options{FS: cfs, Logger: testLogger(t), RetentionCheckInterval: -1})
		if err != nil {
			return nil, err
		}
		if before != nil {
			*before = cfs.Ops()
		}
		return l, op(l)
	}
	wholes, gones := 0, 0
	n := crashEachOp(t, src, run, func(snap string, k int, seed uint64) {
		for _, readOnly := range []bool{true, false} {
			l, err := Open(snap, Options{Logger: testLogger(t), RetentionCheckInterval: -1, ReadOnly: readOnly})
			require.NoError(t, err, "k=%d seed=%d", k, seed)
			keep, err := l.Partition("keep", 0)
			require.NoError(t, err, "k=%d", k)
			require.Equal(t, []string{"0:kept"}, readAll(t, keep, 0))
			top, err := l.Topic("doomed")
			if err == nil {
				require.Len(t, top.Partitions(), 3, "k=%d seed=%d read-only=%v: whole", k, seed, readOnly)
				for _, p := range top.Partitions() {
					require.NotNil(t, readAll(t, p, 0))
				}
				require.Equal(t, int64(-1), top.Config().RetentionMs, "its settings")
				wholes++
			} else {
				require.ErrorIs(t, err, ErrNoTopic)
				gones++
			}
			if !readOnly {
				require.NoError(t, l.Check())
				for _, e := range mustReadDir(t, snap) {
					require.False(t, strings.HasSuffix(e, "-delete") || e == layout.TopicConfigTmp, "k=%d: left behind: %s", k, e)
					if err != nil {
						require.False(t, strings.HasPrefix(e, "doomed"), "k=%d: left behind: %s", k, e)
					}
				}
			}
			require.NoError(t, l.Close())
		}
	})
	require.Greater(t, n, 6)
	require.NotZero(t, wholes)
	require.NotZero(t, gones)
}

// sweepSource makes a data directory with a topic "keep" and, if doomed,
// a topic "doomed" of three partitions with a record each and settings.
func sweepSource(t *testing.T, doomed bool) string {
	src := t.TempDir()
	l, err := Open(src, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	keep, err := l.CreateTopic("keep", 1, nil)
	require.NoError(t, err)
	p, _ := keep.Partition(0)
	_, err = p.Append([]Record{{Value: []byte("kept")}})
	require.NoError(t, err)
	if doomed {
		top, err := l.CreateTopic("doomed", 3, small("retention.ms=-1"))
		require.NoError(t, err)
		for _, p := range top.Partitions() {
			_, err := p.Append([]Record{{Value: []byte("x")}})
			require.NoError(t, err)
		}
	}
	require.NoError(t, l.Close())
	return src
}

// TestDeleteTopicCrash: a crash anywhere in a topic delete leaves the topic
// whole or gone, never some of its partitions, and the next writable open
// removes what is left.
func TestDeleteTopicCrash(t *testing.T) {
	topicCrashSweep(t, sweepSource(t, true), func(l *Log) error { return l.DeleteTopic("doomed") })
}

// TestCreateTopicCrash: the same for creating a topic of three partitions.
func TestCreateTopicCrash(t *testing.T) {
	topicCrashSweep(t, sweepSource(t, false), func(l *Log) error {
		_, err := l.CreateTopic("doomed", 3, small("retention.ms=-1"))
		return err
	})
}

// TestRecreatedTopicInheritsNoCheckpoint: a topic deleted and created again
// under its old name does not take the old topic's checkpoint entries. A
// crash after the new records are durable but before the next checkpoint
// write (up to a minute later) used to give the new partition the old log
// start: its records, below it, were removed as deleted by retention. And
// the old recovery point, past the new log end, claimed offsets the new
// partition never had.
func TestRecreatedTopicInheritsNoCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := reopen(t, dir, false)
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(values(100, "old"))
	require.NoError(t, err)
	_, err = p.AdvanceStart(50)
	require.NoError(t, err)
	require.NoError(t, l.Sync()) // checkpoints: log start 50, recovery point 100

	require.NoError(t, l.DeleteTopic("t"))
	top, err = l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err = top.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(values(10, "new"))
	require.NoError(t, err)
	require.NoError(t, p.Sync()) // durable; no checkpoint written

	crashed := t.TempDir() // what a kill -9 now leaves
	copyDir(t, dir, crashed)
	require.NoError(t, l.Close())

	l = reopen(t, crashed, false)
	defer l.Close()
	rep := l.RecoveryReport()
	require.Empty(t, rep.Partitions[0].Expired, "nothing is taken for deleted by retention")
	p, err = l.Partition("t", 0)
	require.NoError(t, err)
	require.Equal(t, record.Offset(0), p.StartOffset())
	require.Equal(t, record.Offset(10), p.EndOffset())
	got := readAll(t, p, 0)
	require.Len(t, got, 10)
	require.Equal(t, "0:new-0", got[0])
	require.NoError(t, l.Check())
}
