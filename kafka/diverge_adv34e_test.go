package kafka_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// The cluster's log was cut to 10 while logfs was down and grew back to
// exactly the copy's end (20) with other records: nothing but the leader
// epochs tells. A file opened after the mount comes back must read the
// cluster's records, not the copy's lost ones, as a copy kept past the
// cluster's end is checked before a record file opened on it reads.
func TestDivergedCopySameEndAfterRestartAdv34e(t *testing.T) {
	r := &restartable{t: t, id: "diverge-same-end"}
	data, snap, e0 := twoHistories(t, r)
	copyDir := copyAndStop(t, r, data)

	c := r.start(snap)
	require.EqualValues(t, 10, c.PartitionInfo("rg", 0).HighWatermark)
	require.NoError(t, c.MoveTopicPartition("rg", 0, c.LeaderFor("rg", 0)))
	e1 := c.PartitionInfo("rg", 0).Epoch
	require.Greater(t, e1, e0)
	divergeAsKafka(c, "rg", []epochStart{{e0, 0}, {e1, 10}})
	cl := client(t, c)
	produce(t, cl, "rg", 0, values("c", 10)...) // offsets 10..19, epoch e1
	cl.Close()

	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("c", 0, 10), readFile(t, filepath.Join(m.mp, "rg/0/offset/10")))
	require.Equal(t, lines("a", 0, 10)+lines("c", 0, 10), readFile(t, filepath.Join(m.mp, "rg/0/offset/0")))
	m.stop(t)
}

// A read_committed copy whose last batch is an ABORT marker (the aborted
// batches before it are left out), kept across a clean leader change and
// a restart, then followed across another clean leader change with an
// aborted transaction at the end again: every check of the copy's end
// (the leader's OffsetForLeaderEpoch, fetches answered as Kafka does from
// the epochs the cluster stamped) finds it whole, and the copy is never
// fetched again.
func TestReadCommittedCleanLeaderChangesKeepCopyAdv34e(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "rc"))
	txn := client(t, c, kgo.TransactionalID("adv34e-rc"))
	plain := client(t, c)
	produce(t, plain, "rc", 0, "p0", "p1")
	transact(t, txn, "rc", false, "x0", "x1")
	copyDir := t.TempDir()
	mp, done := mountAdv33c(t, c, copyDir, nil)
	require.Equal(t, "p0\np1\n", readFile(t, filepath.Join(mp, "rc/0/offset/0")))
	done()
	seg := filepath.Join(copyDir, "rc-0", "00000000000000000000.log")
	before, err := os.Stat(seg)
	require.NoError(t, err)

	epochs := []epochStart{{c.PartitionInfo("rc", 0).Epoch, 0}}
	move := func() {
		hw := c.PartitionInfo("rc", 0).HighWatermark
		require.NoError(t, c.MoveTopicPartition("rc", 0, c.LeaderFor("rc", 0)))
		epochs = append(epochs, epochStart{c.PartitionInfo("rc", 0).Epoch, hw})
	}
	move()
	answers := []*epochAnswers{divergeAsKafka(c, "rc", epochs)}
	mp, done = mountAdv33c(t, c, copyDir, nil)
	defer done()
	require.Equal(t, "p0\np1\n", readFile(t, filepath.Join(mp, "rc/0/offset/0")))

	produce(t, plain, "rc", 0, "p2")
	transact(t, txn, "rc", false, "y0")
	move()
	answers = append(answers, divergeAsKafka(c, "rc", epochs))
	produce(t, plain, "rc", 0, "p3")
	want := "p0\np1\np2\np3\n"
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(mp, "rc/0/offset/0"))
		if err == nil && string(got) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset/0: %q, %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	done()
	after, err := os.Stat(seg)
	require.NoError(t, err, "the copy's first segment was replaced")
	require.Equal(t, before.Sys().(*syscall.Stat_t).Ino, after.Sys().(*syscall.Stat_t).Ino, "the copy was fetched again")
	for _, a := range answers {
		require.Positive(t, a.asked.Load(), "no fetch named the copy's epoch")
		require.Zero(t, a.diverged.Load())
	}
}

// While mounted, the cluster's log is cut to 10 and grows to 15 under a
// new leader epoch; before any fetch reaches the new leader (its fetches
// fail for now), a file is opened at 12. The cluster said its log ends at
// 15, below the copy's end: the copy's 10..19 may not be the cluster's,
// and the open must not be answered with the lost records (b2..b4).
func TestDivergedLiveOpenBeforeFetchAdv34e(t *testing.T) {
	r := &restartable{t: t, id: "diverge-open-first"}
	data, snap, e0 := twoHistories(t, r)
	c := r.start(data)
	props := kafka.Properties{"request.timeout.ms": "500", "default.api.timeout.ms": "3000", "metadata.max.age.ms": "300", "fetch.max.wait.ms": "100"}
	_, mp := mounted(t, c, kafka.Options{Brokers: c.ListenAddrs(), Properties: props}, fs.Options{})
	require.Equal(t, lines("a", 0, 10)+lines("b", 0, 10), readFile(t, filepath.Join(mp, "rg/0/offset/0")))
	c.Close()

	c = r.start(snap)
	require.NoError(t, c.MoveTopicPartition("rg", 0, c.LeaderFor("rg", 0)))
	e1 := c.PartitionInfo("rg", 0).Epoch
	require.Greater(t, e1, e0)
	var blocked atomic.Bool
	blocked.Store(true)
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !blocked.Load() {
			return nil, nil, false
		}
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			t := kmsg.NewFetchResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, kerr.ReplicaNotAvailable.Code
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	divergeAsKafka(c, "rg", []epochStart{{e0, 0}, {e1, 10}})
	cl := client(t, c)
	produce(t, cl, "rg", 0, values("c", 5)...) // offsets 10..14, epoch e1
	cl.Close()

	// Past the second in which an open is answered from the last fetch.
	time.Sleep(1500 * time.Millisecond)
	got, err := os.ReadFile(filepath.Join(mp, "rg/0/offset/12"))
	if err == nil {
		require.Equal(t, lines("c", 2, 5), string(got), "offset/12 before any fetch reached the new leader")
	}
	blocked.Store(false)
	want := lines("a", 0, 10) + lines("c", 0, 5)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(mp, "rg/0/offset/0"))
		if err == nil && string(got) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset/0 never showed the cluster's log: %q, %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
