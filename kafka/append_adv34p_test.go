package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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
