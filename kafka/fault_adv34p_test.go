package kafka_test

import (
	"bytes"
	"context"
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
	c, mp, f := timeoutAppend(t, "dto")
	_, err := f.Write([]byte("first\n"))
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

// timeoutAppend mounts a cluster with a one-partition topic and short
// delivery and request timeouts, and opens its append file.
func timeoutAppend(t *testing.T, topic string) (*kfake.Cluster, string, *os.File) {
	c := fakeCluster(t, kfake.SeedTopics(1, topic))
	props := kafka.Properties{"delivery.timeout.ms": "1500", "request.timeout.ms": "500", "retry.backoff.ms": "50"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	f, err := os.OpenFile(filepath.Join(mp, topic, "0/append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return c, mp, f
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

// A write of three batches: the second is answered REQUEST_TIMED_OUT
// before the broker appended it, so the third arrives first and is
// refused OUT_OF_ORDER_SEQUENCE; the second's retries are appended, but
// never acknowledged within delivery.timeout.ms. The second's lines are
// in the partition; the write must not say they are not (a short write
// that ends before them, and nothing more), or os.File.Write sends them
// again: a duplicate, which the idempotent producer is there to prevent.
// (Requests go out from one goroutine per batch, so "the second" is the
// first with a sequence above 0 to arrive.)
func TestAdv34pTimedOutBatchNotSentAgainByTheWriter(t *testing.T) {
	c := fakeCluster(t)
	adv34pTopic(t, kadm.NewClient(client(t, c)), "to", "4096")
	props := kafka.Properties{"delivery.timeout.ms": "1500", "request.timeout.ms": "500", "retry.backoff.ms": "50"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	var second atomic.Int32 // base sequence of the write's second batch
	second.Store(-1)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		seq := firstSequence(req)
		if seq <= 0 || !second.CompareAndSwap(-1, seq) {
			return nil, nil, false
		}
		// Its first attempt: not appended, answered REQUEST_TIMED_OUT.
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		resp.Version = pr.Version
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.RequestTimedOut.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// Its retries (epoch 0): appended, answered REQUEST_TIMED_OUT.
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "to", Err: kerr.RequestTimedOut, Count: -1,
		When: func(req kmsg.Request) bool {
			return firstSequence(req) == second.Load() && batchEpoch(req) == 0
		}})
	var data bytes.Buffer
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&data, "%s%04d\n", strings.Repeat("t", 95), i) // 10 KB: three batches
	}
	n, err := appendTo(filepath.Join(mp, "to/0/append"), data.Bytes())
	t.Logf("write: %d of %d bytes, %v", n, data.Len(), err)
	require.Greater(t, second.Load(), int32(0), "the write's second batch was met")
	if err != nil {
		// The rest may have been appended: the writer learns it.
		require.ErrorIs(t, err, syscall.ETIMEDOUT)
	} else {
		require.Equal(t, data.Len(), n)
	}
	// The partition holds the write's first lines, each once, in order:
	// at least those write(2) reported, and all of them when it
	// reported no error.
	ends, err := kadm.NewClient(client(t, c)).ListEndOffsets(context.Background(), "to")
	require.NoError(t, err)
	end, _ := ends.Lookup("to", 0)
	require.GreaterOrEqual(t, end.Offset, int64(n/100), "the lines write(2) reported")
	vals := adv34pValues(t, c, "to", int(end.Offset))
	require.Len(t, vals, int(end.Offset))
	lines := strings.SplitAfter(data.String(), "\n")
	for i, v := range vals {
		require.Equal(t, strings.TrimSuffix(lines[i], "\n"), v, "record %d (a line appended twice, or out of order)", i)
	}
}

// batchEpoch is the producer epoch of the batch of a one-partition
// produce request.
func batchEpoch(req kmsg.Request) int16 {
	for _, t := range req.(*kmsg.ProduceRequest).Topics {
		for _, p := range t.Partitions {
			if len(p.Records) >= 57 {
				return int16(uint16(p.Records[51])<<8 | uint16(p.Records[52]))
			}
		}
	}
	return -1
}

// An ACL that denies writing the topic: the write fails with a
// permission errno at once and nothing of it is produced.
func TestAdv34pWriteDeniedByACL(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "acl"))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	path := filepath.Join(mp, "acl/0/append")
	_, err := appendTo(path, []byte("ok\n"))
	require.NoError(t, err)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "acl", Err: kerr.TopicAuthorizationFailed, Count: -1})
	_, err = appendTo(path, []byte("denied-1\ndenied-2\n"))
	require.True(t, errorsIsAny(err, syscall.EPERM, syscall.EACCES), "want a permission errno, got %v", err)
	h.Remove()
	_, err = appendTo(path, []byte("again\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"ok", "again"}, adv34pValues(t, c, "acl", 2))
}

// Writers to four partitions of a topic at once, each in writes of many
// batches: each partition holds its writer's lines once, in order.
func TestAdv34pConcurrentPartitions(t *testing.T) {
	c := fakeCluster(t)
	adm := kadm.NewClient(client(t, c))
	max := "4096"
	_, err := adm.CreateTopic(context.Background(), 4, 1, map[string]*string{"max.message.bytes": &max}, "mp")
	require.NoError(t, err)
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	want := make([]string, 4)
	errs := make(chan error, 4)
	for p := 0; p < 4; p++ {
		var data bytes.Buffer
		for i := 0; i < 1000; i++ {
			fmt.Fprintf(&data, "p%d-%04d-%s\n", p, i, strings.Repeat("c", 60))
		}
		want[p] = data.String()
		go func() {
			n, err := appendTo(filepath.Join(mp, "mp", fmt.Sprint(p), "append"), data.Bytes())
			if err == nil && n != data.Len() {
				err = fmt.Errorf("partition %d: %d of %d bytes", p, n, data.Len())
			}
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	for p := 0; p < 4; p++ {
		var got bytes.Buffer
		for _, r := range consumeAll(t, c, "mp", int32(p), 1000) {
			got.WriteString(string(r.Value) + "\n")
		}
		sameText(t, want[p], got.String())
	}
}
