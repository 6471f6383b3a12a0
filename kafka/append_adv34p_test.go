package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// adv34pTopic creates topic with one partition and max.message.bytes max.
func adv34pTopic(t *testing.T, adm *kadm.Client, topic, max string) {
	t.Helper()
	_, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &max}, topic)
	require.NoError(t, err)
}

// adv34pSetLimit sets topic's max.message.bytes on the cluster, as
// kafka-configs --alter does.
func adv34pSetLimit(t *testing.T, adm *kadm.Client, topic, max string) {
	t.Helper()
	rs, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &max}}, topic)
	require.NoError(t, err)
	for _, r := range rs {
		require.NoError(t, r.Err)
	}
}

// Programs each append one write(2) of many lines to the same
// partition at once. README: the complete lines of one request are
// appended "in the fewest batches that do, never interleaved with another
// writer's". On a cluster a write bigger than max.message.bytes is cut
// into several batches; those of one write must stay together.
func TestAdv34pConcurrentWritesNotInterleaved(t *testing.T) {
	c := fakeCluster(t)
	adv34pTopic(t, kadm.NewClient(client(t, c)), "cw", "4096")
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	// The kernel serializes writes to one inode; append and append.jsonl
	// of one partition are two.
	paths := []string{filepath.Join(mp, "cw/0/append"), filepath.Join(mp, "cw/0/append.jsonl")}
	const writers, rounds, perWrite = 4, 4, 400 // 40 KB a write: ten batches
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				var data bytes.Buffer
				for i := 0; i < perWrite; i++ {
					line := fmt.Sprintf("w%d-r%d-%04d-%s", w, r, i, strings.Repeat("x", 80))
					if w%2 == 1 {
						line = `{"value":"` + line + `"}`
					}
					data.WriteString(line + "\n")
				}
				n, err := appendTo(paths[w%2], data.Bytes())
				if err == nil && n != data.Len() {
					err = fmt.Errorf("short write %d of %d", n, data.Len())
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	recs := consumeAll(t, c, "cw", 0, writers*rounds*perWrite)
	require.Len(t, recs, writers*rounds*perWrite)
	// Each write's lines are perWrite records in a row, in order.
	for i := 0; i < len(recs); i += perWrite {
		head := strings.SplitN(string(recs[i].Value), "-", 3)
		for j := 0; j < perWrite; j++ {
			want := fmt.Sprintf("%s-%s-%04d-%s", head[0], head[1], j, strings.Repeat("x", 80))
			require.Equal(t, want, string(recs[i+j].Value), "record %d: the lines of one write interleaved with another's", i+j)
		}
	}
}

// The topic's max.message.bytes is lowered on the cluster after the mount
// first wrote to it (kafka-configs --alter). A write of many short lines,
// each well under the new limit, must go in (cut into batches the broker
// takes), not fail with EFBIG, which says a record is too large.
func TestAdv34pLimitLoweredOnTheCluster(t *testing.T) {
	c := fakeCluster(t)
	adm := kadm.NewClient(client(t, c))
	adv34pTopic(t, adm, "low", "1048588")
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	path := filepath.Join(mp, "low/0/append")
	_, err := appendTo(path, []byte("first\n"))
	require.NoError(t, err)

	adv34pSetLimit(t, adm, "low", "4096")
	var data bytes.Buffer
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&data, "%s%d\n", strings.Repeat("q", 95), 1000+i) // 40 KB of 100-byte lines
	}
	n, err := appendTo(path, data.Bytes())
	require.NoError(t, err, "lines of 100 bytes under a limit of 4096")
	require.Equal(t, data.Len(), n)
	recs := consumeAll(t, c, "low", 0, 401)
	require.Len(t, recs, 401)
	var got bytes.Buffer
	for _, r := range recs[1:] {
		got.Write(r.Value)
		got.WriteByte('\n')
	}
	sameText(t, data.String(), got.String())

	// A line over the new limit is EFBIG, and nothing of its write goes in.
	_, err = appendTo(path, []byte("before\n"+strings.Repeat("b", 5000)+"\nafter\n"))
	require.ErrorIs(t, err, syscall.EFBIG)
	_, err = appendTo(path, []byte("last\n"))
	require.NoError(t, err)
	recs = consumeAll(t, c, "low", 0, 402)
	require.Len(t, recs, 402)
	require.Equal(t, "last", string(recs[401].Value))
}

// A topic deleted and created again between two appends (each its own
// open, as `echo >>` does): the second append goes into the new topic
// once, and the mount shows the new topic's records only.
func TestAdv34pAppendAfterTopicRecreated(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "re"))
	props := kafka.Properties{"metadata.max.age.ms": "300", "retry.backoff.ms": "50"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	path := filepath.Join(mp, "re/0/append")
	_, err := appendTo(path, []byte("old-1\nold-2\n"))
	require.NoError(t, err)
	require.Equal(t, "old-1\nold-2\n", readFile(t, filepath.Join(mp, "re/0/offset/0")))
	adm := kadm.NewClient(client(t, c))
	_, err = adm.DeleteTopic(context.Background(), "re")
	require.NoError(t, err)
	_, err = adm.CreateTopic(context.Background(), 1, 1, nil, "re")
	require.NoError(t, err)
	var n int
	require.Eventually(t, func() bool {
		n, err = appendTo(path, []byte("new-1\nnew-2\n"))
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "append to the new topic: %v", err)
	require.Equal(t, 12, n)
	recs := consumeAll(t, c, "re", 0, 2)
	require.Len(t, recs, 2)
	require.Equal(t, "new-1", string(recs[0].Value))
	require.Equal(t, "new-2", string(recs[1].Value))
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(mp, "re/0/offset/0"))
		return err == nil && string(b) == "new-1\nnew-2\n"
	}, 10*time.Second, 100*time.Millisecond)
}

// A program writing 4 KiB at a time (dd bs=4096, a buffered writer):
// lines longer than 4 KiB, lines split across writes and a last line
// without a newline become exactly the records meant, in order.
func TestAdv34pLinesSplitAcross4KiBWrites(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "split"))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	var data bytes.Buffer
	var want []string
	for i := 0; i < 60; i++ {
		line := fmt.Sprintf("%03d-%s", i, strings.Repeat(string(rune('a'+i%26)), (i*997)%9000))
		want = append(want, line)
		data.WriteString(line)
		if i < 59 {
			data.WriteByte('\n')
		}
	}
	f, err := os.OpenFile(filepath.Join(mp, "split/0/append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	for b := data.Bytes(); len(b) > 0; {
		k := min(4096, len(b))
		n, err := f.Write(b[:k])
		require.NoError(t, err)
		require.Equal(t, k, n)
		b = b[k:]
	}
	require.NoError(t, f.Close())
	recs := consumeAll(t, c, "split", 0, len(want))
	require.Len(t, recs, len(want))
	for i, r := range recs {
		require.Equal(t, want[i], string(r.Value), "record %d", i)
	}
}

// The topic's max.message.bytes is raised on the cluster after the mount
// first wrote to it. README: "on a mounted cluster only the cluster's
// max.message.bytes counts"; a line under the new limit must go in, not
// fail with EFBIG because of the limit the copy learned earlier.
func TestAdv34pLimitRaisedOnTheCluster(t *testing.T) {
	c := fakeCluster(t)
	adm := kadm.NewClient(client(t, c))
	adv34pTopic(t, adm, "high", "4096")
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	path := filepath.Join(mp, "high/0/append")
	_, err := appendTo(path, []byte("first\n"))
	require.NoError(t, err)

	adv34pSetLimit(t, adm, "high", "1048588")
	line := strings.Repeat("L", 10000)
	_, err = appendTo(path, []byte(line+"\n"))
	require.NoError(t, err, "a line of 10000 bytes under a limit of 1048588")
	recs := consumeAll(t, c, "high", 0, 2)
	require.Equal(t, line, string(recs[1].Value))
}

// Read your writes, every way: right after each append returns, its
// record is at offset/N (N its offset, not ENOENT), info's log end offset
// is past it, and offset/latest is past it.
func TestAdv34pReadYourWritesEveryView(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "ryw"))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "ryw/0")
	for i := 0; i < 5; i++ {
		_, err := appendTo(filepath.Join(dir, "append"), []byte(fmt.Sprintf("r%d\n", i)))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("r%d\n", i), readFile(t, filepath.Join(dir, "offset", fmt.Sprint(i))), "offset/%d", i)
		var info struct {
			LogEnd int64 `json:"log_end_offset"`
		}
		require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "info"))), &info))
		require.EqualValues(t, i+1, info.LogEnd, "info after append %d", i)
		st, err := os.Stat(filepath.Join(dir, "offset/latest"))
		require.NoError(t, err)
		require.Equal(t, int64(0), st.Size(), "offset/latest is the end, past the record")
	}
}
