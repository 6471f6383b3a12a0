package kafka_test

import (
	"context"
	"errors"
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
)

// transact produces values in one transaction and commits or aborts it.
func transact(t testing.TB, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, cl.BeginTransaction())
	produce(t, cl, topic, 0, values...)
	require.NoError(t, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
}

// Records of aborted transactions are hidden under read_committed (the
// default) and shown under read_uncommitted; control batches never show,
// and other producers' records interleaved with a transaction stay.
func TestMountTransactions(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "tx"))
	txn := client(t, c, kgo.TransactionalID("logfs-test"))
	plain := client(t, c)
	transact(t, txn, "tx", true, "c1", "c2")
	require.NoError(t, txn.BeginTransaction())
	produce(t, txn, "tx", 0, "a1")
	produce(t, plain, "tx", 0, "p1") // between the aborted records
	produce(t, txn, "tx", 0, "a2")
	require.NoError(t, txn.EndTransaction(context.Background(), kgo.TryAbort))
	transact(t, txn, "tx", true, "c3")
	produce(t, plain, "tx", 0, "p2")

	_, rc := mounted(t, c, kafka.Options{}, fs.Options{})
	require.Equal(t, "c1\nc2\np1\nc3\np2\n", readFile(t, filepath.Join(rc, "tx/0/offset/0")))
	_, ru := mounted(t, c, kafka.Options{Properties: kafka.Properties{"isolation.level": "read_uncommitted"}}, fs.Options{})
	require.Equal(t, "c1\nc2\na1\np1\na2\nc3\np2\n", readFile(t, filepath.Join(ru, "tx/0/offset/0")))

	// An open transaction: read_committed stops before it (the last
	// stable offset), read_uncommitted shows it.
	require.NoError(t, txn.BeginTransaction())
	produce(t, txn, "tx", 0, "open")
	produce(t, plain, "tx", 0, "after-open")
	require.Equal(t, "c1\nc2\np1\nc3\np2\n", readFile(t, filepath.Join(rc, "tx/0/offset/0")))
	require.Eventually(t, func() bool {
		return readFile(t, filepath.Join(ru, "tx/0/offset/0")) == "c1\nc2\na1\np1\na2\nc3\np2\nopen\nafter-open\n"
	}, 5*time.Second, 50*time.Millisecond)
	require.NoError(t, txn.EndTransaction(context.Background(), kgo.TryAbort))
	require.Eventually(t, func() bool {
		return readFile(t, filepath.Join(rc, "tx/0/offset/0")) == "c1\nc2\np1\nc3\np2\nafter-open\n"
	}, 5*time.Second, 50*time.Millisecond)
}

// Records deleted on the cluster (DeleteRecords) behave like local
// retention: the offsets below the new start do not exist, earliest moves,
// and a reader whose records went is told (EIO), never served a hole.
func TestMountDeleteRecords(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "del"))
	cl := client(t, c)
	for i := 0; i < 10; i++ {
		produce(t, cl, "del", 0, "r"+strconv.Itoa(2*i), "r"+strconv.Itoa(2*i+1))
	}
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "del/0")
	require.Equal(t, lines("r", 0, 20), readFile(t, filepath.Join(dir, "offset/0")))

	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "del", Partition: 0, At: 7})
	resp, err := adm.DeleteRecords(context.Background(), offs)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(dir, "offset/3"))
		return errors.Is(err, os.ErrNotExist)
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, lines("r", 7, 20), readFile(t, filepath.Join(dir, "offset/earliest")))
	require.Equal(t, lines("r", 9, 20), readFile(t, filepath.Join(dir, "offset/9")))
}

// A partition whose leader moves goes on being followed and appended to;
// a broker that goes away does not hang readers, what is local still
// reads, and an append that cannot be acknowledged in time fails with
// ETIMEDOUT.
func TestMountLeaderMovesAndBrokerStops(t *testing.T) {
	c := fakeCluster(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "mv"))
	cl := client(t, c)
	produce(t, cl, "mv", 0, "before")
	props := kafka.Properties{"delivery.timeout.ms": "1500", "request.timeout.ms": "500", "default.api.timeout.ms": "1500"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	dir := filepath.Join(mp, "mv/0")
	f, err := os.Open(filepath.Join(dir, "offset/0"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 100)
	n, err := f.ReadAt(buf, 0)
	require.Equal(t, "before\n", string(buf[:n]))

	leader := c.LeaderFor("mv", 0)
	other := int32(0)
	if leader == 0 {
		other = 1
	}
	require.NoError(t, c.MoveTopicPartition("mv", 0, other))
	_, err = appendTo(filepath.Join(dir, "append"), []byte("after move\n"))
	require.NoError(t, err)
	produce(t, cl, "mv", 0, "from elsewhere")
	require.Eventually(t, func() bool {
		n, _ := f.ReadAt(buf, 0)
		return string(buf[:n]) == "before\nafter move\nfrom elsewhere\n"
	}, 10*time.Second, 50*time.Millisecond, "the open file follows the new leader")

	c.Close() // every broker gone
	require.Equal(t, "before\nafter move\nfrom elsewhere\n", readFile(t, filepath.Join(dir, "offset/0")), "what is local reads")
	start := time.Now()
	_, err = appendTo(filepath.Join(dir, "append"), []byte("lost\n"))
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, syscall.EIO), "%v", err)
	require.Less(t, time.Since(start), 20*time.Second)
}

// A topic created again under the same name is another topic: the copy of
// the old one is not shown as the new one's.
func TestMountTopicRecreated(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "again"))
	cl := client(t, c)
	produce(t, cl, "again", 0, "old-1", "old-2")
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	require.Equal(t, "old-1\nold-2\n", readFile(t, filepath.Join(mp, "again/0/offset/0")))
	adm := kadm.NewClient(cl)
	_, err := adm.DeleteTopic(context.Background(), "again")
	require.NoError(t, err)
	_, err = adm.CreateTopic(context.Background(), 1, 1, nil, "again")
	require.NoError(t, err)
	produce(t, client(t, c), "again", 0, "new") // a client that never knew the old topic id
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(mp, "again/0/offset/0"))
		return err == nil && strings.TrimSpace(string(b)) == "new"
	}, 10*time.Second, 100*time.Millisecond)
}

// A topic deleted and created again while the mount runs, before the mount
// reads it, is another topic even though the copy on disk (from an earlier
// mount) holds the old one: the old records are not shown as the new
// topic's, nor the new ones appended after them.
func TestMountTopicRecreatedBeforeFirstRead(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "again"))
	cl := client(t, c)
	produce(t, cl, "again", 0, "old-1", "old-2")
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, "old-1\nold-2\n", readFile(t, filepath.Join(m.mp, "again/0/offset/0")))
	m.stop(t)

	_, mp := mounted(t, c, kafka.Options{Dir: copyDir}, fs.Options{})
	adm := kadm.NewClient(cl)
	_, err := adm.DeleteTopic(context.Background(), "again")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(mp, "again"))
		return errors.Is(err, os.ErrNotExist)
	}, 10*time.Second, 50*time.Millisecond, "the deleted topic leaves the tree")
	_, err = adm.CreateTopic(context.Background(), 1, 1, nil, "again")
	require.NoError(t, err)
	fresh := client(t, c)
	produce(t, fresh, "again", 0, "new-1", "new-2")
	produce(t, fresh, "again", 0, "new-3") // a batch of its own at the old copy's end
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(mp, "again/0"))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the new topic enters the tree")
	require.Equal(t, "new-1\nnew-2\nnew-3\n", readFile(t, filepath.Join(mp, "again/0/offset/0")))
}
