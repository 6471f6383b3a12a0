package kafka_test

// Tests that try to break the promises of a cluster mount: faults of the
// brokers mid-read and mid-append, interrupted opens, hostile input.

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// stall makes the brokers read requests of key and never answer them,
// as a broker that hangs does, until the returned flag is cleared.
func stall(c *kfake.Cluster, key kmsg.Key) *atomic.Bool {
	on := new(atomic.Bool)
	on.Store(true)
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !on.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		return nil, nil, true
	})
	return on
}

// values returns prefix0 … prefix(n-1).
func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// A broker that stops answering fetches does not hang an open for ever:
// it fails with ETIMEDOUT after default.api.timeout.ms; a file open
// before the stall still reads what is local; once the broker answers
// again the open file grows.
func TestMountFetchStallsMidRead(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "st"))
	cl := client(t, c)
	produce(t, cl, "st", 0, "a", "b")
	props := kafka.Properties{"request.timeout.ms": "500", "default.api.timeout.ms": "800", "fetch.max.wait.ms": "100"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	dir := filepath.Join(mp, "st/0")
	f, err := os.Open(filepath.Join(dir, "offset/0"))
	require.NoError(t, err)
	defer f.Close()

	on := stall(c, kmsg.Fetch)
	produce(t, cl, "st", 0, "c")
	time.Sleep(1100 * time.Millisecond) // what the last fetch said is a second old
	start := time.Now()
	_, err = os.ReadFile(filepath.Join(dir, "offset/2"))
	require.ErrorIs(t, err, syscall.ETIMEDOUT)
	require.Less(t, time.Since(start), 10*time.Second)
	buf := make([]byte, 100)
	n, _ := f.ReadAt(buf, 0)
	require.Equal(t, "a\nb\n", string(buf[:n]), "what is local reads during the stall")

	on.Store(false)
	require.Eventually(t, func() bool {
		n, _ := f.ReadAt(buf, 0)
		return string(buf[:n]) == "a\nb\nc\n"
	}, 10*time.Second, 20*time.Millisecond, "the open file grows once the broker answers again")
	require.Equal(t, "c\n", readFile(t, filepath.Join(dir, "offset/2")))
}

// An open waits for the copy as long as the copy keeps growing: a
// partition that takes longer than default.api.timeout.ms to copy opens,
// and only a copy that stops growing for that long times out.
//
// The broker answers each fetch after 8 ms and with one batch of the 200,
// so the copy takes at least 1.6 s of round trips, one after the other,
// against a timeout of 1 s: an open bounded by the timeout in all fails.
// Between two batches the copy is idle for a round trip only, far less
// than a second even on a loaded machine (the test once used 200 ms, which
// a busy machine exceeded between batches, and Open's first contact too).
func TestMountOpenWaitsWhileTheCopyGrows(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "slow"))
	cl := client(t, c)
	const batches = 200
	vals := values(strings.Repeat("s", 1000), batches)
	for _, v := range vals {
		produce(t, cl, "slow", 0, v) // one batch each
	}
	props := kafka.Properties{"default.api.timeout.ms": "1000", "fetch.max.bytes": "1024", "max.partition.fetch.bytes": "1024"}
	var fetches atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		fetches.Add(1)
		time.Sleep(8 * time.Millisecond) // a broker far away
		return nil, nil, false
	})
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	start := time.Now()
	require.Equal(t, strings.Join(vals, "\n")+"\n", readFile(t, filepath.Join(mp, "slow/0/offset/0")))
	// The premise: the copy took a round trip per batch (8 ms each, in
	// sequence), so more than the timeout in all.
	require.GreaterOrEqual(t, fetches.Load(), int64(batches), "fetches")
	t.Logf("copied in %v, %d fetches", time.Since(start), fetches.Load())
}

// SIGINT or SIGKILL of a reader whose open waits for the copy ends it at
// once, and the mount goes on serving.
func TestMountInterruptedOpen(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "intr"))
	cl := client(t, c)
	produce(t, cl, "intr", 0, "x", "y")
	// default.api.timeout.ms stays 60 s: only the interrupt ends the open.
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"request.timeout.ms": "1000"}}, fs.Options{})
	on := stall(c, kmsg.Fetch)
	path := filepath.Join(mp, "intr/0/offset/0")
	for _, sig := range []os.Signal{os.Interrupt, os.Kill} {
		cat := exec.Command("cat", path)
		require.NoError(t, cat.Start())
		time.Sleep(300 * time.Millisecond) // cat waits in open
		start := time.Now()
		require.NoError(t, cat.Process.Signal(sig))
		done := make(chan error, 1)
		go func() { done <- cat.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cat.Process.Kill()
			t.Fatalf("cat did not end within 5 s of %v", sig)
		}
		require.Less(t, time.Since(start), 5*time.Second)
	}
	on.Store(false)
	require.Equal(t, "x\ny\n", readFile(t, path))
}

// A broker that takes an append but never answers: the write fails with
// ETIMEDOUT after delivery.timeout.ms, and it is not sent again after
// that: once the broker is back, the record never shows, and the next
// append goes through.
func TestMountAppendStallNotRetriedAfter(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "ps"))
	props := kafka.Properties{"delivery.timeout.ms": "1000", "request.timeout.ms": "400", "default.api.timeout.ms": "3000"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	dir := filepath.Join(mp, "ps/0")
	_, err := appendTo(filepath.Join(dir, "append"), []byte("first\n"))
	require.NoError(t, err)

	on := stall(c, kmsg.Produce)
	start := time.Now()
	_, err = appendTo(filepath.Join(dir, "append"), []byte("lost\n"))
	require.ErrorIs(t, err, syscall.ETIMEDOUT)
	require.Less(t, time.Since(start), 10*time.Second)
	on.Store(false)
	time.Sleep(time.Second) // a retry would come now
	_, err = appendTo(filepath.Join(dir, "append"), []byte("next\n"))
	require.NoError(t, err)
	require.Equal(t, "first\nnext\n", readFile(t, filepath.Join(dir, "offset/0")))
	recs := consumeAll(t, c, "ps", 0, 2)
	require.Len(t, recs, 2)
}

// An append the broker applied but answered with a retriable error is
// sent again with the same sequence numbers and appears once.
func TestMountAppendAnsweredLateAppearsOnce(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "late"))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "late/0")
	_, err := appendTo(filepath.Join(dir, "append"), []byte("warm\n"))
	require.NoError(t, err)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "late", Err: kerr.RequestTimedOut, Count: 1})
	_, err = appendTo(filepath.Join(dir, "append"), []byte("once\n"))
	require.NoError(t, err)
	require.Equal(t, "warm\nonce\n", readFile(t, filepath.Join(dir, "offset/0")))
}

// Topic names a cluster (or something posing as one) sends that cannot be
// file names, or Kafka topic names, are left out of the tree: nothing is
// created outside the copy, and the other topics are served.
func TestMountHostileTopicNames(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "good"))
	produce(t, client(t, c), "good", 0, "fine")
	info := c.TopicInfo("good")
	pinfo := c.PartitionInfo("good", 0)
	host, port, err := net.SplitHostPort(c.ListenAddrs()[0])
	require.NoError(t, err)
	portN, _ := strconv.Atoi(port)
	clusterID := describeClusterID(t, c)
	hostile := []string{"../evil", "a/b", ".", "..", "", "nul\x00byte", strings.Repeat("x", 300)}
	c.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		resp.SetVersion(req.GetVersion())
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(portN)
		resp.Brokers = append(resp.Brokers, b)
		resp.ClusterID = kmsg.StringPtr(clusterID)
		resp.ControllerID = 0
		for i, name := range append([]string{"good"}, hostile...) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = kmsg.StringPtr(name), info.TopicID
			mt.TopicID[0] += byte(i)
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = 0, 0, pinfo.Epoch
			mp.Replicas, mp.ISR = []int32{0}, []int32{0}
			mt.Partitions = append(mt.Partitions, mp)
			resp.Topics = append(resp.Topics, mt)
		}
		return resp, nil, true
	})
	copyDir := t.TempDir()
	props := kafka.Properties{"default.api.timeout.ms": "5000"}
	_, mount := mounted(t, c, kafka.Options{Dir: filepath.Join(copyDir, "copy"), Properties: props}, fs.Options{})
	entries, err := os.ReadDir(mount)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"good"}, names)
	require.Equal(t, "fine\n", readFile(t, filepath.Join(mount, "good/0/offset/0")))
	for _, name := range []string{"..", "evil", "a"} {
		_, err := os.Stat(filepath.Join(mount, name, "0"))
		require.Error(t, err, name)
	}
	outside, err := os.ReadDir(copyDir)
	require.NoError(t, err)
	require.Len(t, outside, 1, "nothing beside the copy")
}

// time/T before 1970 is a time like any other: it finds the first record
// at or after it, as locally, and not what ListOffsets' special negative
// timestamps (-1 latest, -2 earliest, -3 the max timestamp) mean.
func TestMountTimeBefore1970(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "old"))
	cl := client(t, c)
	produce(t, cl, "old", 0, "r0", "r1", "r2")
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	for _, ts := range []string{"1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.998Z", "1969-12-31T23:59:59.997Z", "1960-01-01"} {
		require.Equal(t, "r0\nr1\nr2\n", readFile(t, filepath.Join(mp, "old/0/time", ts)), ts)
	}
}

// Client properties that cannot work are refused when the cluster is
// opened, with the property named, instead of overflowing into timeouts
// that end at once or never.
func TestBadClientProperties(t *testing.T) {
	c := fakeCluster(t)
	for _, kv := range []string{
		"request.timeout.ms=3000000000", "delivery.timeout.ms=99999999999999999", "fetch.max.wait.ms=2147483648",
		"default.api.timeout.ms=-5", "retry.backoff.ms=1e3", "metadata.max.age.ms=", "fetch.max.bytes=3000000000",
	} {
		props := kafka.Properties{}
		require.NoError(t, props.SetPair(kv))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		kc, err := kafka.Open(ctx, kafka.Options{Brokers: c.ListenAddrs(), Properties: props, Dir: t.TempDir(), Logger: testLogger(t)})
		cancel()
		if err == nil {
			kc.Close()
		}
		require.ErrorIs(t, err, kafka.ErrConfig, kv)
		require.ErrorContains(t, err, strings.SplitN(kv, "=", 2)[0])
	}

	dir := t.TempDir()
	big := filepath.Join(dir, "big.properties")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("client.id=logfs\n", 1<<17)), 0o600)) // 2 MiB
	_, err := kafka.ReadProperties(big)
	require.ErrorIs(t, err, kafka.ErrConfig, "a properties file of megabytes is not one")
	_, err = kafka.ReadProperties(dir)
	require.Error(t, err, "a directory")
	junk := filepath.Join(dir, "junk")
	require.NoError(t, os.WriteFile(junk, []byte("\x00\x01\x02\xff\n"), 0o600))
	_, err = kafka.ReadProperties(junk)
	require.ErrorIs(t, err, kafka.ErrConfig)
	require.ErrorContains(t, err, "line 1")
}

// Records deleted on the cluster (DeleteRecords, retention) past what the
// copy had fetched while a file is open: the file gets EIO where its
// records went, and never shows the records after the gap as if they
// followed.
func TestMountDeletedWhileBehind(t *testing.T) {
	for _, how := range []string{"DeleteRecords", "retention"} {
		t.Run(how, func(t *testing.T) { testDeletedWhileBehind(t, how) })
	}
}

func testDeletedWhileBehind(t *testing.T, how string) {
	c := fakeCluster(t)
	require.NoError(t, c.CreateTopic("gone", 1, map[string]string{"retention.ms": "3600000"}))
	cl := client(t, c)
	produce(t, cl, "gone", 0, "a0", "a1")
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"request.timeout.ms": "500", "fetch.max.wait.ms": "100"}}, fs.Options{})
	f, err := os.Open(filepath.Join(mp, "gone/0/offset/0"))
	require.NoError(t, err)
	defer f.Close()
	on := stall(c, kmsg.Fetch)
	if how == "DeleteRecords" {
		produce(t, cl, "gone", 0, "a2", "a3", "a4", "a5")
		require.NoError(t, c.DeleteRecords("gone", 0, 4))
	} else {
		// Old records by their stamps; the newest batch always stays.
		for i, v := range []string{"a2", "a3"} {
			require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: "gone", Value: []byte(v), Timestamp: time.Now().Add(-time.Duration(3-i) * 2 * time.Hour)}).FirstErr())
		}
		produce(t, cl, "gone", 0, "a4", "a5")
		c.ApplyRetention()
		require.Equal(t, int64(4), c.PartitionInfo("gone", 0).LogStartOffset, "retention deleted the old batches")
	}
	on.Store(false)
	buf := make([]byte, 100)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := f.ReadAt(buf, 0)
		got := string(buf[:n])
		require.True(t, strings.HasPrefix("a0\na1\n", got) || got == "a0\na1\n", "the file shows %q", got)
		if err != nil && !errors.Is(err, io.EOF) {
			require.ErrorIs(t, err, syscall.EIO)
			break
		}
		require.True(t, time.Now().Before(deadline), "no error at the gap")
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, "a4\na5\n", readFile(t, filepath.Join(mp, "gone/0/offset/earliest")))
	_, err = os.Stat(filepath.Join(mp, "gone/0/offset/2"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// describeClusterID asks the cluster for its id.
func describeClusterID(t testing.TB, c *kfake.Cluster) string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), client(t, c))
	require.NoError(t, err)
	require.NotNil(t, resp.ClusterID)
	return *resp.ClusterID
}

// An open whose file alone needs more than the copy's byte budget fails
// with EFBIG as soon as the copy reaches the budget, instead of filling
// the disk; a file that fits opens, and the copy goes back within budget.
func TestMountOpenOverBudget(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "huge"))
	cl := client(t, c)
	value := strings.Repeat("h", 1000)
	for i := 0; i < 30; i++ {
		produce(t, cl, "huge", 0, values(value, 100)...) // 3 MB in all
	}
	kc, mp := mounted(t, c, kafka.Options{CopyBytes: 1 << 20, CopySegmentBytes: 128 << 10}, fs.Options{})
	_, err := os.ReadFile(filepath.Join(mp, "huge/0/offset/0"))
	require.ErrorIs(t, err, syscall.EFBIG)
	require.Equal(t, lines(value, 90, 100), readFile(t, filepath.Join(mp, "huge/0/offset/2990")))
	p, err := kc.Copy(context.Background(), "huge", 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Size() <= 1<<20 }, 10*time.Second, 50*time.Millisecond)
}

// Numbers no partition has: offsets past int64, the largest int64,
// partitions past int32, negative ones, timestamps that overflow. Each is
// ENOENT or EINVAL, and the mount goes on serving.
func TestMountHugeNumbers(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "n"))
	produce(t, client(t, c), "n", 0, "one")
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "n")
	for _, name := range []string{"0/offset/99999999999999999999", "0/offset/9223372036854775807", "0/offset/9223372036854775807.jsonl",
		"0/offset/-1", "0/offset/1e3", "0/time/99999999999999999999", "0/time/-5",
		"2147483648/offset/0", "4294967296", "-1", "1"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.ErrorIs(t, err, os.ErrNotExist, name)
	}
	for _, name := range []string{"2147483648", "-1", "9999999999999999999999", "1.0", "01"} {
		err := os.Mkdir(filepath.Join(dir, name), 0o755)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EEXIST), "mkdir %s: %v", name, err)
	}
	require.Equal(t, "", readFile(t, filepath.Join(dir, "0/time/9223372036854775807")), "after every record: the end, as locally")
	require.Equal(t, "one\n", readFile(t, filepath.Join(dir, "0/offset/0")))
}

// A file open on a topic that is deleted and created again never goes on
// with the new topic's records as if they followed its own.
func TestMountTopicRecreatedUnderAnOpenFile(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "re"))
	produce(t, client(t, c), "re", 0, "old-0", "old-1")
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"metadata.max.age.ms": "200"}}, fs.Options{})
	f, err := os.Open(filepath.Join(mp, "re/0/offset/0"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, c.DeleteTopic("re"))
	require.NoError(t, c.CreateTopic("re", 1, nil))
	produce(t, client(t, c), "re", 0, "new-0", "new-1", "new-2", "new-3")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(mp, "re/0/offset/1"))
		return err == nil && string(b) == "new-1\nnew-2\nnew-3\n"
	}, 10*time.Second, 50*time.Millisecond, "the new topic reads")
	buf := make([]byte, 100)
	for i := 0; i < 10; i++ {
		n, _ := f.ReadAt(buf, 0)
		require.True(t, strings.HasPrefix("old-0\nold-1\n", string(buf[:n])), "the old file shows %q", buf[:n])
		time.Sleep(20 * time.Millisecond)
	}
}
