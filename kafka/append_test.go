package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// consumeAll reads a partition with franz-go's consumer, as another
// client of the cluster sees it.
func consumeAll(t testing.TB, c *kfake.Cluster, topic string, partition int32, want int) []*kgo.Record {
	t.Helper()
	cl := client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "got %d records of %d", len(out), want)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func appendTo(path string, data []byte) (int, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	n, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// Appends produce to the cluster with the local framing: each line a
// record, the lines of one write in one batch, the partial last line on
// close; a file opened after the write returned shows it (read your
// writes), and another client sees it.
func TestMountAppends(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "in"))
	kc, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "in/0")

	_, err := appendTo(filepath.Join(dir, "append"), []byte("one\n"))
	require.NoError(t, err)
	require.Equal(t, "one\n", readFile(t, filepath.Join(dir, "offset/0")), "read your writes")
	_, err = appendTo(filepath.Join(dir, "append"), []byte("two\nthree\nfour\npartial"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return readFile(t, filepath.Join(dir, "offset/0")) == "one\ntwo\nthree\nfour\npartial\n"
	}, 5*time.Second, 20*time.Millisecond, "the partial line is appended on release")
	_, err = appendTo(filepath.Join(dir, "append.jsonl"), []byte(`{"key":"k","value":"v","headers":{"h":"x"},"timestamp":1700000000000}`+"\n"))
	require.NoError(t, err)
	require.Equal(t, `{"offset":5,"timestamp":1700000000000,"key":"k","headers":[{"key":"h","value":"x"}],"value":"v"}`+"\n",
		readFile(t, filepath.Join(dir, "offset/5.jsonl")))

	recs := consumeAll(t, c, "in", 0, 6)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	require.Equal(t, []string{"one", "two", "three", "four", "partial", "v"}, got)
	require.Equal(t, recs[1].ProducerID, recs[3].ProducerID, "idempotent producer")
	require.GreaterOrEqual(t, recs[1].ProducerID, int64(0))
	// two, three and four were one write: one batch.
	var shapes []string
	for _, h := range copyBatches(t, kc, "in", 0) {
		shapes = append(shapes, fmt.Sprintf("%d+%d", h.BaseOffset, h.LastOffsetDelta+1))
	}
	require.Equal(t, []string{"0+1", "1+3", "4+1", "5+1"}, shapes, "the lines of one write in one batch")
	require.Equal(t, "k", string(recs[5].Key))
	require.Equal(t, int64(1700000000000), recs[5].Timestamp.UnixMilli())
}

// copyBatches lists the batch headers of a partition's copy, as stored.
func copyBatches(t testing.TB, kc *kafka.Cluster, topic string, partition int) []record.BatchHeader {
	t.Helper()
	dir := filepath.Join(kc.Log().Dir(), layout.PartitionDirName(topic, partition))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []record.BatchHeader
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), layout.LogSuffix) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		st, _ := f.Stat()
		sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{HeadersOnly: true})
		for sc.Next() {
			out = append(out, sc.Batch().BatchHeader)
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	return out
}

// A record over the topic's max.message.bytes fails its write with EFBIG
// and nothing of that write reaches the cluster; a write bigger than one
// produce batch can hold is taken in parts, each one batch, none lost.
func TestMountAppendLimits(t *testing.T) {
	c := fakeCluster(t)
	adm := kadm.NewClient(client(t, c))
	max := "4096"
	_, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &max}, "small")
	require.NoError(t, err)
	kc, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "small/0")

	write := []byte("ok-1\n" + strings.Repeat("y", 5000) + "\nok-2\n")
	_, err = appendTo(filepath.Join(dir, "append"), write)
	require.ErrorIs(t, err, syscall.EFBIG)
	require.Equal(t, "", readFile(t, filepath.Join(dir, "offset/0")), "nothing of the failed write")

	// 400 lines of 100 bytes: 40 KB, about ten batches of 4 KiB.
	var big bytes.Buffer
	for i := 0; i < 400; i++ {
		big.WriteString(strings.Repeat("z", 95) + strconv.Itoa(1000+i) + "\n")
	}
	n, err := appendTo(filepath.Join(dir, "append"), big.Bytes())
	require.NoError(t, err)
	require.Equal(t, big.Len(), n)
	require.Equal(t, big.String(), readFile(t, filepath.Join(dir, "offset/0")))
	for _, h := range copyBatches(t, kc, "small", 0) {
		require.LessOrEqual(t, h.Size(), int64(4096))
	}
}

// mkdir creates topics and partitions on the cluster, with Kafka's name
// rules and errors mapped to errno; topics created and deleted elsewhere
// appear and disappear.
func TestMountMkdir(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "there"))
	adm := kadm.NewClient(client(t, c))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})

	require.NoError(t, os.Mkdir(filepath.Join(mp, "made"), 0o755))
	td, err := adm.ListTopics(context.Background(), "made")
	require.NoError(t, err)
	require.True(t, td.Has("made"))
	require.ErrorIs(t, os.Mkdir(filepath.Join(mp, "made"), 0o755), syscall.EEXIST)
	require.ErrorIs(t, os.Mkdir(filepath.Join(mp, "bad name"), 0o755), syscall.EINVAL)
	require.ErrorIs(t, os.Mkdir(filepath.Join(mp, strings.Repeat("a", 250)), 0o755), syscall.EINVAL)

	n := len(td["made"].Partitions)
	require.NoError(t, os.Mkdir(filepath.Join(mp, "made", strconv.Itoa(n)), 0o755))
	require.ErrorIs(t, os.Mkdir(filepath.Join(mp, "made", strconv.Itoa(n+5)), 0o755), syscall.EINVAL)
	parts, err := os.ReadDir(filepath.Join(mp, "made"))
	require.NoError(t, err)
	require.Len(t, parts, n+1)
	_, err = appendTo(filepath.Join(mp, "made", strconv.Itoa(n), "append"), []byte("in the new partition\n"))
	require.NoError(t, err)
	require.Equal(t, "in the new partition\n", readFile(t, filepath.Join(mp, "made", strconv.Itoa(n), "offset/0")))

	_, err = adm.CreateTopic(context.Background(), 1, 1, nil, "elsewhere")
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(mp, "elsewhere")); return err == nil }, 5*time.Second, 50*time.Millisecond)
	_, err = adm.DeleteTopic(context.Background(), "there")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		entries, _ := os.ReadDir(mp)
		for _, e := range entries {
			if e.Name() == "there" {
				return false
			}
		}
		_, err := os.Stat(filepath.Join(mp, "there", "0", "offset", "0"))
		return errors.Is(err, os.ErrNotExist)
	}, 10*time.Second, 100*time.Millisecond, "a deleted topic disappears")
}

// compression.type compresses the batches of appends; the default is none.
func TestMountAppendCompression(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "z", "plain"))
	kc, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"compression.type": "zstd"}}, fs.Options{})
	data := []byte(strings.Repeat("compress me please\n", 200))
	_, err := appendTo(filepath.Join(mp, "z/0/append"), data)
	require.NoError(t, err)
	require.Equal(t, string(data), readFile(t, filepath.Join(mp, "z/0/offset/0")))
	hs := copyBatches(t, kc, "z", 0)
	require.Len(t, hs, 1)
	require.Equal(t, record.Zstd, hs[0].Attributes.Compression())
	require.Less(t, hs[0].Size(), int64(len(data)/4))

	kc2, mp2 := mounted(t, c, kafka.Options{}, fs.Options{})
	_, err = appendTo(filepath.Join(mp2, "plain/0/append"), data)
	require.NoError(t, err)
	require.Equal(t, string(data), readFile(t, filepath.Join(mp2, "plain/0/offset/0")))
	require.Equal(t, record.None, copyBatches(t, kc2, "plain", 0)[0].Attributes.Compression())
}

// The copy's segment.bytes limits nothing the mount appends to a cluster:
// a line larger than a segment of the copy, well under the topic's
// max.message.bytes, is produced. (The copy cannot hold that batch, and
// says so in its log: its segments are 128 MiB unless a test makes them
// small, as here.)
func TestMountAppendLargerThanCopySegment(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "wide"))
	_, mp := mounted(t, c, kafka.Options{CopySegmentBytes: 64 << 10}, fs.Options{})
	line := strings.Repeat("w", 100<<10)
	n, err := appendTo(filepath.Join(mp, "wide/0/append"), []byte(line+"\n"))
	require.NoError(t, err)
	require.Equal(t, len(line)+1, n)
	got := consumeAll(t, c, "wide", 0, 1)
	require.Len(t, got, 1)
	require.Equal(t, line, string(got[0].Value))
}
