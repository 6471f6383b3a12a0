package integration

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	logfs "github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fixtures"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// decodeValues renders the values of a partition folder's records from
// offset start on, decoding its .log files directly with package record
// (control batches skipped): what offset/<start> must show.
func decodeValues(t *testing.T, dir string, start record.Offset) ([]byte, int) {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*"+layout.LogSuffix))
	require.NoError(t, err)
	sort.Strings(logs)
	var out bytes.Buffer
	var dec record.Decoder
	n := 0
	for _, path := range logs {
		f, err := os.Open(path)
		require.NoError(t, err)
		st, err := f.Stat()
		require.NoError(t, err)
		sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{})
		for sc.Next() {
			if sc.Batch().Attributes.Control() {
				continue
			}
			it, err := dec.Records(sc.Batch())
			require.NoError(t, err)
			for it.Next() {
				if r := it.Record(); r.Offset >= start {
					out.Write(r.Value)
					out.WriteByte('\n')
					n++
				}
			}
			require.NoError(t, it.Err())
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
	}
	return out.Bytes(), n
}

// snapshot lists a tree's files with their sizes and modification times.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %d %v\n", p, info.Size(), info.ModTime().UnixNano(), info.Mode())
		return nil
	}))
	return b.String()
}

// TestKafkaFixtures mounts, read-only, every data directory a real Kafka
// broker wrote, and compares cat offset/<start> of every partition with
// the records decoded directly. Nothing in the fixtures may change.
func TestKafkaFixtures(t *testing.T) {
	for _, d := range fixtures.DataDirs(t) {
		t.Run(d.Set, func(t *testing.T) {
			before := snapshot(t, d.Path)
			t.Cleanup(func() { require.Equal(t, before, snapshot(t, d.Path), "the fixture changed") })
			l := openLog(t, d.Path, storage.Options{ReadOnly: true})
			mnt := mount(t, l, logfs.Options{})
			total := 0
			for _, topic := range l.Topics() {
				top, err := l.Topic(topic)
				require.NoError(t, err)
				for _, p := range top.Partitions() {
					start := p.StartOffset()
					want, n := decodeValues(t, p.Dir(), start)
					total += n
					file := filepath.Join(part(mnt, topic, p.ID()), "offset", strconv.FormatInt(int64(start), 10))
					require.Equal(t, string(want), sh(t, "cat %s", q(file)), "%s-%d", topic, p.ID())
					got, err := os.ReadFile(filepath.Join(part(mnt, topic, p.ID()), "offset", "earliest.jsonl"))
					require.NoError(t, err)
					require.Equal(t, n, bytes.Count(got, []byte("\n")), "%s-%d .jsonl", topic, p.ID())
				}
			}
			require.Positive(t, total)
			top, err := l.Topic(l.Topics()[0])
			require.NoError(t, err)
			app := filepath.Join(part(mnt, top.Name(), top.Partitions()[0].ID()), "append")
			require.Contains(t, shFails(t, "echo x >> %s", q(app)), "Read-only")
		})
	}
}

// TestFSTest runs testing/fstest over a quiet mount: every file opens,
// reads the same through every path, stats the same as its directory
// entry says.
func TestFSTest(t *testing.T) {
	l, _ := newLog(t, nil)
	// Small files: fstest reads each one byte by byte, and with direct I/O
	// every read is a request.
	p := newPartition(t, l, "alpha", storage.Overrides{"segment.bytes": 4 << 10})
	fill(t, p, 100)
	b := newPartition(t, l, "beta", nil)
	_, err := b.Append([]storage.Record{{Key: []byte("k"), Value: []byte{0xff, 0}}, {Value: nil}})
	require.NoError(t, err)
	top, err := l.Topic("beta")
	require.NoError(t, err)
	_, err = top.AddPartition(1)
	require.NoError(t, err)
	mnt := mount(t, l, logfs.Options{})
	require.NoError(t, fstest.TestFS(os.DirFS(mnt),
		"alpha/0/append", "alpha/0/append.jsonl", "alpha/0/info", "alpha/0/offset/0", "alpha/0/offset/earliest",
		"alpha/0/offset/latest", "beta/0/offset/0", "beta/1/info", "beta/1/offset/latest"))
}
