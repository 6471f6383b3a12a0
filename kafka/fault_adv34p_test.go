package kafka_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

func adv34pValues(t *testing.T, c *kfake.Cluster, topic string, want int) []string {
	t.Helper()
	var out []string
	for _, r := range consumeAll(t, c, topic, 0, want) {
		out = append(out, string(r.Value))
	}
	return out
}

// InitProducerID refused for good (the principal may not write
// idempotently: CLUSTER_AUTHORIZATION_FAILED) fails the write with a
// permission errno and produces nothing; a retriable refusal is retried.
// Once allowed, the next write goes in once.
func TestAdv34pInitProducerIDFaults(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "ipid"))
	props := kafka.Properties{"delivery.timeout.ms": "3000", "request.timeout.ms": "1000", "retry.backoff.ms": "20"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	path := filepath.Join(mp, "ipid/0/append")
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.ClusterAuthorizationFailed, Count: 1, TopLevel: true})
	_, err := appendTo(path, []byte("denied\n"))
	require.Error(t, err)
	require.True(t, errorsIsAny(err, syscall.EPERM, syscall.EACCES), "want a permission errno, got %v", err)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.CoordinatorNotAvailable, Count: 2, TopLevel: true})
	_, err = appendTo(path, []byte("allowed\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"allowed"}, adv34pValues(t, c, "ipid", 1))
	require.Equal(t, "allowed\n", readFile(t, filepath.Join(mp, "ipid/0/offset/0")))
}

// A write the brokers never acknowledge (NOT_ENOUGH_REPLICAS: not
// appended) fails with ETIMEDOUT after delivery.timeout.ms and leaves
// nothing; one whose every attempt is appended and answered
// REQUEST_TIMED_OUT fails with ETIMEDOUT and is there once (README: it
// may still have been appended). The next write on the same file goes in
// once, after them.
func TestAdv34pDeliveryTimeout(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "dto"))
	props := kafka.Properties{"delivery.timeout.ms": "1500", "request.timeout.ms": "500", "retry.backoff.ms": "50"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	f, err := os.OpenFile(filepath.Join(mp, "dto/0/append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte("first\n"))
	require.NoError(t, err)

	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "dto", Err: kerr.NotEnoughReplicas, Count: -1})
	_, err = f.Write([]byte("never\n"))
	require.ErrorIs(t, err, syscall.ETIMEDOUT)
	h.Remove()

	h = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "dto", Err: kerr.RequestTimedOut, Count: -1})
	_, err = f.Write([]byte("late\n"))
	require.ErrorIs(t, err, syscall.ETIMEDOUT)
	h.Remove()

	_, err = f.Write([]byte("second\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"first", "late", "second"}, adv34pValues(t, c, "dto", 3))
	require.Equal(t, "first\nlate\nsecond\n", readFile(t, filepath.Join(mp, "dto/0/offset/0")))
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errorsIs(err, t) {
			return true
		}
	}
	return false
}

var errorsIs = errors.Is

// The partition's leader moves back and forth while writes of ten
// batches each are on the way: every line is in the partition once, in
// order, and write(2) (with os.File's loop over short writes) reports
// all of it.
func TestAdv34pLeaderMovesDuringWrites(t *testing.T) {
	c := fakeCluster(t, kfake.NumBrokers(3))
	adv34pTopic(t, kadm.NewClient(client(t, c)), "lm", "4096")
	props := kafka.Properties{"retry.backoff.ms": "20", "metadata.max.age.ms": "500"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	var seen, moved atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if seen.Add(1)%4 == 3 {
			go func() {
				next := (c.LeaderFor("lm", 0) + 1) % 3
				if c.MoveTopicPartition("lm", 0, next) == nil {
					moved.Add(1)
				}
			}()
		}
		return nil, nil, false
	})
	var all bytes.Buffer
	for w := 0; w < 5; w++ {
		var data bytes.Buffer
		for i := 0; i < 400; i++ {
			fmt.Fprintf(&data, "w%d-%04d-%s\n", w, i, strings.Repeat("m", 90))
		}
		n, err := appendTo(filepath.Join(mp, "lm/0/append"), data.Bytes())
		require.NoError(t, err)
		require.Equal(t, data.Len(), n)
		all.Write(data.Bytes())
	}
	var got bytes.Buffer
	for _, v := range adv34pValues(t, c, "lm", 2000) {
		got.WriteString(v + "\n")
	}
	sameText(t, all.String(), got.String())
	sameText(t, all.String(), readFile(t, filepath.Join(mp, "lm/0/offset/0")))
	require.Greater(t, moved.Load(), int32(3), "the leader moved")
}
