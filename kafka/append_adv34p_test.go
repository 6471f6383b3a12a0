package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// adv34pTopic creates topic with one partition and max.message.bytes max.
func adv34pTopic(t *testing.T, adm *kadm.Client, topic, max string) {
	t.Helper()
	_, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &max}, topic)
	require.NoError(t, err)
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

	small := "4096"
	rs, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &small}}, "low")
	require.NoError(t, err)
	for _, r := range rs {
		require.NoError(t, r.Err)
	}
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
