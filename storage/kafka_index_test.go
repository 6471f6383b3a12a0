package storage

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/internal/kafkaindex"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// kafkaIndexCase is one way of writing a fixture's indexes.
type kafkaIndexCase struct {
	style    kafkaindex.Style
	at       kafkaindex.MaxTimestampAt
	interval int64
}

func (c kafkaIndexCase) String() string {
	return fmt.Sprintf("%v/%v/interval=%d", c.style, c.at, c.interval)
}

// kafkaIndexCases are the writers of every Kafka version, each with the
// offsets of the max timestamp its leaders and followers use, at intervals
// that give the small fixtures many entries.
func kafkaIndexCases() []kafkaIndexCase {
	var out []kafkaIndexCase
	for _, interval := range []int64{0, 300} {
		out = append(out,
			kafkaIndexCase{kafkaindex.Kafka11, kafkaindex.AtBatchLast, interval},
			kafkaIndexCase{kafkaindex.Kafka2x, kafkaindex.AtBatchLast, interval},
			kafkaIndexCase{kafkaindex.Kafka2x, kafkaindex.AtFirstRecord, interval},
			kafkaIndexCase{kafkaindex.Kafka2x, kafkaindex.AtAppendLast, interval},
			kafkaIndexCase{kafkaindex.Kafka40, kafkaindex.AtBatchLast, interval},
		)
	}
	return out
}

// prepareKafkaIndexes copies a fixture data directory, rewrites every
// segment's indexes as c says, and makes the copy look cleanly shut down
// (marker and checkpoints at each partition's end), so that opening it
// trusts the index files; or, not clean, as after a crash with no recovery
// point, so that opening it scans every segment (and keeps the files that
// keep the rule). It returns the copy and the index files' bytes by path.
func prepareKafkaIndexes(t *testing.T, d fixtures.DataDir, c kafkaIndexCase, seed int64, clean bool) (string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	copyDir(t, d.Path, dir)
	rng := rand.New(rand.NewSource(seed))
	rp := map[recovery.TopicPartition]record.Offset{}
	ls := map[recovery.TopicPartition]record.Offset{}
	files := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		topic, id, ok := layout.ParsePartitionDirName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		pdir := filepath.Join(dir, e.Name())
		require.NoError(t, kafkaindex.Write(pdir, c.style, c.at, c.interval, rng))
		_, end := scanPartitionDir(t, pdir)
		logs, err := filepath.Glob(filepath.Join(pdir, "*"+layout.LogSuffix))
		require.NoError(t, err)
		sort.Strings(logs)
		first, _, _ := layout.ParseSegmentFileName(filepath.Base(logs[0]))
		last, _, _ := layout.ParseSegmentFileName(filepath.Base(logs[len(logs)-1]))
		tp := recovery.TopicPartition{Topic: topic, Partition: id}
		rp[tp], ls[tp] = max(end, last), first
		for _, suffix := range []string{layout.IndexSuffix, layout.TimeIndexSuffix} {
			matches, err := filepath.Glob(filepath.Join(pdir, "*"+suffix))
			require.NoError(t, err)
			for _, m := range matches {
				b, err := os.ReadFile(m)
				require.NoError(t, err)
				files[m] = b
			}
		}
	}
	require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(dir, layout.RecoveryPointFile), rp))
	require.NoError(t, recovery.WriteCheckpoint(vfs.Default, filepath.Join(dir, layout.LogStartFile), ls))
	if clean {
		require.NoError(t, recovery.WriteCleanShutdownMarker(vfs.Default, dir))
	} else {
		require.NoError(t, os.Remove(filepath.Join(dir, layout.RecoveryPointFile)))
	}
	return dir, files
}

// TestKafkaIndexesValid writes each fixture's indexes the way every Kafka
// version writes them (see kafkaindex.Style) and checks that Check
// accepts them, that lookups by offset and by time use them (no rebuild,
// no in-memory index) and answer as a scan of the log does, and that a
// writable open leaves them byte for byte as they were.
func TestKafkaIndexesValid(t *testing.T) {
	dirs := fixtures.DataDirs(t)
	for ci, c := range kafkaIndexCases() {
		t.Run(c.String(), func(t *testing.T) {
			for _, d := range dirs {
				for _, mode := range []string{"clean", "crashed", "crashed, read-only first"} {
					dir, files := prepareKafkaIndexes(t, d, c, int64(ci), mode == "clean")
					readOnlies := []bool{true, false}
					if mode == "crashed" {
						readOnlies = []bool{false, true}
					}
					for _, readOnly := range readOnlies {
						var logs logCounter
						l, err := Open(dir, Options{ReadOnly: readOnly, Logger: logs.logger(), RetentionCheckInterval: -1})
						require.NoError(t, err, d.Set)
						require.NoError(t, l.Check(), "%s read-only=%v", d.Set, readOnly)
						for _, name := range l.Topics() {
							top, err := l.Topic(name)
							require.NoError(t, err)
							for _, p := range top.Partitions() {
								checkKafkaLookups(t, p)
							}
						}
						require.NoError(t, l.Close())
						for _, bad := range []string{"unusable", "rebuilding", "in memory", `msg="corrupt`} {
							require.Zero(t, logs.count(bad), "%s read-only=%v: %q logged:\n%s", d.Set, readOnly, bad, strings.Join(logs.msgs, ""))
						}
						for path, want := range files {
							got, err := os.ReadFile(path)
							require.NoError(t, err)
							require.Equal(t, want, got, "%s left as it was (%s, read-only=%v)", path, mode, readOnly)
						}
					}
				}
			}
		})
	}
}

// checkKafkaLookups checks every lookup by offset and by time of p against
// a scan of its log files.
func checkKafkaLookups(t *testing.T, p *Partition) {
	all, _ := scanPartitionDir(t, p.Dir())
	var data []fixtureRecord
	for _, r := range all {
		if !r.ctrl {
			data = append(data, r)
		}
	}
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	for off := p.StartOffset(); off < p.EndOffset(); off++ {
		require.NoError(t, r.Seek(off))
		rec, err := r.Next()
		i := sort.Search(len(data), func(i int) bool { return data[i].offset >= off })
		if i == len(data) {
			require.True(t, errors.Is(err, io.EOF), "%s seek %d: %v", p, off, err)
			continue
		}
		require.NoError(t, err, "%s seek %d", p, off)
		require.Equal(t, data[i].offset, rec.Offset, "%s seek %d", p, off)
	}
	for _, w := range all {
		for _, ts := range []int64{w.ts - 1, w.ts, w.ts + 1} {
			expect := p.EndOffset()
			for _, x := range all {
				if x.ts >= ts {
					expect = x.offset
					break
				}
			}
			got, err := p.OffsetForTime(ts)
			require.NoError(t, err)
			require.Equal(t, expect, got, "%s time %d", p, ts)
		}
	}
}
