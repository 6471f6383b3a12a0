package kafka_test

// A copy whose end the cluster lost to an unclean leader election, with
// the cluster's log grown past the copy's end since: only the leader
// epochs tell. kfake does not check a fetch's LastFetchedEpoch (its
// Fetch, v12+, leaves divergence out), so these tests answer fetches that
// name an epoch the way a Kafka broker does (Partition.readRecords), from
// the epochs the test gave the cluster's log.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// epochStart is where a leader epoch begins in a partition's log: an
// entry of Kafka's leader-epoch-checkpoint.
type epochStart struct {
	epoch int32
	start int64
}

// endFor is Kafka's LeaderEpochFileCache.endOffsetFor for an epoch below
// the latest: the largest epoch at or below it, and where the epoch after
// that one begins. ok is false for the latest epoch and later ones, and
// for an epoch older than every entry.
func endFor(epochs []epochStart, e int32) (epoch int32, end int64, ok bool) {
	for i := len(epochs) - 1; i >= 0; i-- {
		if epochs[i].epoch <= e {
			if i == len(epochs)-1 {
				return 0, 0, false
			}
			return epochs[i].epoch, epochs[i+1].start, true
		}
	}
	return 0, 0, false
}

// divergeAsKafka makes c answer a fetch of topic/0 that names a last
// fetched epoch as a Kafka broker does when the epoch's end in epochs is
// before the fetch offset, or the epoch is not in the log: with a
// diverging epoch and no records. It counts the fetches that name an
// epoch, and those it answers so.
func divergeAsKafka(c *kfake.Cluster, topic string, epochs []epochStart) *epochAnswers {
	n := &epochAnswers{}
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
			return nil, nil, false
		}
		rt, rp := req.Topics[0], req.Topics[0].Partitions[0]
		if (rt.Topic != topic && rt.Topic != "") || rp.Partition != 0 || rp.LastFetchedEpoch < 0 {
			return nil, nil, false
		}
		n.asked.Add(1)
		epoch, end, ok := endFor(epochs, rp.LastFetchedEpoch)
		if !ok || (epoch == rp.LastFetchedEpoch && end >= rp.FetchOffset) {
			return nil, nil, false // the copy's end is in the log: fetch as usual
		}
		n.diverged.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = 0
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = end, end, 0
		p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = epoch, end
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
		return resp, nil, true
	})
	return n
}

type epochAnswers struct{ asked, diverged atomic.Int32 }

// restartable starts clusters on a data directory, all with one ID and,
// after the first, the first one's port.
type restartable struct {
	t    *testing.T
	id   string
	port int
}

func (r *restartable) start(dir string) *kfake.Cluster {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.ClusterID(r.id), kfake.DataDir(dir)}
	if r.port != 0 {
		opts = append(opts, kfake.Ports(r.port))
	}
	c, err := kfake.NewCluster(opts...)
	require.NoError(r.t, err)
	r.t.Cleanup(c.Close)
	if r.port == 0 {
		addr := c.ListenAddrs()[0]
		require.True(r.t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
		r.port, _ = strconv.Atoi(strings.TrimPrefix(addr, "127.0.0.1:"))
	}
	return c
}

// twoHistories returns a cluster data directory whose topic "rg" holds
// a0..a9 then b0..b9 in leader epoch e0, and a snapshot of it taken after
// a0..a9 (the log an out-of-sync replica would have).
func twoHistories(t *testing.T, r *restartable) (data, snap string, e0 int32) {
	data, snap = t.TempDir(), t.TempDir()
	c := r.start(data)
	require.NoError(t, c.CreateTopic("rg", 1, nil))
	cl := client(t, c)
	produce(t, cl, "rg", 0, values("a", 10)...)
	cl.Close()
	c.Close()
	copyTreeAdv33c(t, data, snap)
	c = r.start(data)
	cl = client(t, c)
	produce(t, cl, "rg", 0, values("b", 10)...) // offsets 10..19
	cl.Close()
	e0 = c.PartitionInfo("rg", 0).Epoch
	c.Close()
	return data, snap, e0
}

// copyAndStop starts the cluster of data and a mount process that copies
// rg/0 whole (a0..a9 b0..b9), then stops both; it returns the copy's
// directory.
func copyAndStop(t *testing.T, r *restartable, data string) string {
	c := r.start(data)
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("a", 0, 10)+lines("b", 0, 10), readFile(t, filepath.Join(m.mp, "rg/0/offset/0")))
	m.stop(t)
	c.Close()
	return copyDir
}

// electAndGrow starts the snapshot's cluster as the new leader (a new
// epoch from offset 10, as after an unclean election) and writes n other
// records there. It returns the cluster and its epochs.
func electAndGrow(t *testing.T, r *restartable, snap string, e0 int32, n int) (*kfake.Cluster, []epochStart, *epochAnswers) {
	c := r.start(snap)
	require.EqualValues(t, 10, c.PartitionInfo("rg", 0).HighWatermark)
	require.NoError(t, c.MoveTopicPartition("rg", 0, c.LeaderFor("rg", 0)))
	e1 := c.PartitionInfo("rg", 0).Epoch
	require.Greater(t, e1, e0)
	epochs := []epochStart{{e0, 0}, {e1, 10}}
	diverged := divergeAsKafka(c, "rg", epochs)
	cl := client(t, c)
	// Two batches, the second from 20, where the copy ends: its base
	// offset alone cannot tell the copy it lost its place.
	vs := values("c", n)
	produce(t, cl, "rg", 0, vs[:10]...) // offsets 10..19, epoch e1
	produce(t, cl, "rg", 0, vs[10:]...) // offsets 20.., epoch e1
	cl.Close()
	return c, epochs, diverged
}

// The cluster's log was cut to 10 and grew to 25 while logfs was down;
// the copy held 20. Its end is below the cluster's, so only the epoch of
// its last batch shows that its offsets 10..19 are not the cluster's.
func TestDivergedCopyAfterRestart(t *testing.T) {
	r := &restartable{t: t, id: "diverge-restart"}
	data, snap, e0 := twoHistories(t, r)
	copyDir := copyAndStop(t, r, data)

	c, _, diverged := electAndGrow(t, r, snap, e0, 15)
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("a", 0, 10)+lines("c", 0, 15), readFile(t, filepath.Join(m.mp, "rg/0/offset/0")))
	require.Equal(t, lines("c", 10, 15), readFile(t, filepath.Join(m.mp, "rg/0/offset/20")))
	require.Equal(t, lines("c", 0, 15), readFile(t, filepath.Join(m.mp, "rg/0/offset/10")))
	m.stop(t)
	require.Positive(t, diverged.diverged.Load(), "the copy was never told it diverged")
}

// The same while the mount runs: the broker goes away and comes back
// (same address) as the new leader of a log cut to 10 and grown to 25.
// Files opened afterwards show the cluster's records.
func TestDivergedCopyWhileMounted(t *testing.T) {
	r := &restartable{t: t, id: "diverge-live"}
	data, snap, e0 := twoHistories(t, r)
	c := r.start(data)
	props := kafka.Properties{"request.timeout.ms": "500", "default.api.timeout.ms": "5000", "metadata.max.age.ms": "300", "fetch.max.wait.ms": "100"}
	_, mp := mounted(t, c, kafka.Options{Brokers: c.ListenAddrs(), Properties: props}, fs.Options{})
	require.Equal(t, lines("a", 0, 10)+lines("b", 0, 10), readFile(t, filepath.Join(mp, "rg/0/offset/0")))
	c.Close()

	_, _, diverged := electAndGrow(t, r, snap, e0, 15)
	want := lines("a", 0, 10) + lines("c", 0, 15)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(filepath.Join(mp, "rg/0/offset/0"))
		if err == nil && string(got) == want {
			break
		}
		if err == nil && len(got) > 0 {
			// Whatever is served before the copy catches up must be a
			// prefix of the cluster's log, never the lost b records.
			require.True(t, strings.HasPrefix(want, string(got)), "offset/0 served %q", got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset/0 never showed the cluster's log: %q, %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Positive(t, diverged.diverged.Load())
}

// A leader change that lost nothing (the new epoch begins at the copy's
// end) keeps the copy: the fetch names the epoch, the leader finds it
// whole, and the copy's files stay as they were.
func TestCleanLeaderChangeKeepsCopy(t *testing.T) {
	r := &restartable{t: t, id: "diverge-clean"}
	data := t.TempDir()
	c := r.start(data)
	require.NoError(t, c.CreateTopic("rg", 1, nil))
	cl := client(t, c)
	produce(t, cl, "rg", 0, values("a", 20)...)
	cl.Close()
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("a", 0, 20), readFile(t, filepath.Join(m.mp, "rg/0/offset/0")))
	m.stop(t)
	seg := filepath.Join(copyDir, "rg-0", "00000000000000000000.log")
	before, err := os.Stat(seg)
	require.NoError(t, err)

	e0 := c.PartitionInfo("rg", 0).Epoch
	require.NoError(t, c.MoveTopicPartition("rg", 0, c.LeaderFor("rg", 0)))
	e1 := c.PartitionInfo("rg", 0).Epoch
	diverged := divergeAsKafka(c, "rg", []epochStart{{e0, 0}, {e1, 20}})
	cl = client(t, c)
	produce(t, cl, "rg", 0, values("a", 25)[20:]...)
	cl.Close()
	m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("a", 0, 25), readFile(t, filepath.Join(m.mp, "rg/0/offset/0")))
	m.stop(t)
	after, err := os.Stat(seg)
	require.NoError(t, err, "the copy's first segment was replaced")
	require.Equal(t, before.Sys().(*syscall.Stat_t).Ino, after.Sys().(*syscall.Stat_t).Ino, "the copy was fetched again")
	require.Positive(t, diverged.asked.Load(), "no fetch named the copy's epoch")
	require.Zero(t, diverged.diverged.Load())
}

func TestEndFor(t *testing.T) {
	epochs := []epochStart{{2, 0}, {5, 10}, {7, 30}}
	for _, c := range []struct {
		e       int32
		epoch   int32
		end     int64
		defined bool
	}{
		{1, 0, 0, false}, {2, 2, 10, true}, {3, 2, 10, true}, {5, 5, 30, true}, {6, 5, 30, true}, {7, 0, 0, false}, {9, 0, 0, false},
	} {
		epoch, end, ok := endFor(epochs, c.e)
		require.Equal(t, c.defined, ok, "epoch %d", c.e)
		if ok {
			require.Equal(t, c.epoch, epoch, "epoch %d", c.e)
			require.Equal(t, c.end, end, "epoch %d", c.e)
		}
	}
}
