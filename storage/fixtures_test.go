package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

type fixtureRecord struct {
	offset record.Offset
	ts     int64
	key    string
	value  string
	nilKey bool
	nilVal bool
	heads  int
	ctrl   bool // a control record: skipped by readers, found by time lookups as in Kafka
}

// scanPartitionDir reads a partition folder's .log files directly with the
// record package, skipping control batches: the expected contents.
func scanPartitionDir(t *testing.T, dir string) ([]fixtureRecord, record.Offset) {
	logs, err := filepath.Glob(filepath.Join(dir, "*"+layout.LogSuffix))
	require.NoError(t, err)
	sort.Strings(logs)
	var out []fixtureRecord
	var dec record.Decoder
	end := record.Offset(-1)
	for _, path := range logs {
		f, err := os.Open(path)
		require.NoError(t, err)
		st, _ := f.Stat()
		sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{})
		for sc.Next() {
			end = sc.Batch().NextOffset()
			ctrl := sc.Batch().Attributes.Control()
			it, err := dec.Records(sc.Batch())
			require.NoError(t, err)
			for it.Next() {
				r := it.Record()
				out = append(out, fixtureRecord{r.Offset, r.Timestamp, string(r.Key), string(r.Value), r.Key == nil, r.Value == nil, len(r.Headers), ctrl})
			}
			require.NoError(t, it.Err())
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	return out, end
}

// TestFixturesReadBack opens every data directory a real Kafka broker wrote,
// read-only, and reads every record back through the log, the views and the
// time lookup, comparing with a direct decode of the files. Nothing in the
// fixtures may change.
func TestFixturesReadBack(t *testing.T) {
	for _, d := range fixtures.DataDirs(t) {
		t.Run(d.Set, func(t *testing.T) {
			before := snapshotTree(t, d.Path)
			l, err := Open(d.Path, Options{ReadOnly: true, Logger: testLogger(t)})
			require.NoError(t, err)
			defer func() {
				require.NoError(t, l.Close())
				require.Equal(t, before, snapshotTree(t, d.Path), "a read-only open changes nothing")
			}()
			require.NotEmpty(t, l.Topics())
			for _, name := range l.Topics() {
				top, err := l.Topic(name)
				require.NoError(t, err)
				for _, p := range top.Partitions() {
					checkFixturePartition(t, p)
				}
			}
			require.NoError(t, l.Check())
		})
	}
}

func checkFixturePartition(t *testing.T, p *Partition) {
	all, end := scanPartitionDir(t, p.Dir())
	var want []fixtureRecord
	for _, r := range all {
		if !r.ctrl {
			want = append(want, r)
		}
	}
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	var got []fixtureRecord
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, fixtureRecord{rec.Offset, rec.Timestamp, string(rec.Key), string(rec.Value), rec.Key == nil, rec.Value == nil, len(rec.Headers), false})
	}
	r.Close()
	require.Equal(t, want, got, p.String())
	if end >= 0 {
		require.Equal(t, end, p.EndOffset(), "%s log end", p)
	}
	for _, f := range []Format{Values, JSONL} {
		v, err := p.NewView(f, p.StartOffset())
		require.NoError(t, err)
		size, err := v.Size()
		require.NoError(t, err)
		buf := make([]byte, size)
		n, err := v.ReadAt(buf, 0)
		if size > 0 {
			require.NoError(t, err)
		}
		require.Equal(t, string(renderAll(t, p, f, p.StartOffset())), string(buf[:n]), "%s %v", p, f)
		v.Close()
	}
	// offsetsForTimes against brute force: the first record at or after T.
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

func snapshotTree(t *testing.T, dir string) map[string]string {
	m := map[string]string{}
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		m[path] = fmt.Sprintf("%v %d %v", info.Mode(), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	require.NoError(t, err)
	return m
}
