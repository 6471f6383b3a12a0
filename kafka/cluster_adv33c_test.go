package kafka_test

// Adversarial tests of the cluster mount (adv33c): restarts with a copy
// ahead of or behind the cluster, deletes, new partitions, random reads,
// a full copy disk, planted links, compressed batches.

import (
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// copyTree copies a directory tree of regular files.
func copyTreeAdv33c(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, exec.Command("cp", "-a", from+"/.", to).Run())
}

// A cluster whose log of a partition was truncated and written again
// under the same offsets (an unclean leader election; here a broker
// restarted from an older copy of its data) while logfs was down: the
// restarted mount must not serve the copy's old records under offsets the
// cluster now holds other records at.
func TestAdv33cRestartCopyAheadOfTruncatedCluster(t *testing.T) {
	data := t.TempDir()
	snap := t.TempDir()
	start := (&restartable{t: t, id: "adv33c-cluster"}).start
	c := start(data)
	require.NoError(t, c.CreateTopic("tr", 1, nil))
	cl := client(t, c)
	produce(t, cl, "tr", 0, values("a", 10)...)
	cl.Close()
	c.Close()
	copyTreeAdv33c(t, data, snap) // the cluster's state with a0..a9

	c = start(data)
	cl = client(t, c)
	produce(t, cl, "tr", 0, values("b", 10)...) // offsets 10..19
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("a", 0, 10)+lines("b", 0, 10), readFile(t, filepath.Join(m.mp, "tr/0/offset/0")))
	m.stop(t)
	cl.Close()
	c.Close()

	c = start(snap) // the log ends at 10 again
	require.EqualValues(t, 10, c.PartitionInfo("tr", 0).HighWatermark)
	cl = client(t, c)
	produce(t, cl, "tr", 0, values("c", 5)...) // offsets 10..14, other records
	m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	_, err := os.Stat(filepath.Join(m.mp, "tr/0/offset/17"))
	require.ErrorIs(t, err, os.ErrNotExist, "offset/17: the cluster's log ends at 15")
	got, err := os.ReadFile(filepath.Join(m.mp, "tr/0/offset/0"))
	if err == nil {
		require.Equal(t, lines("a", 0, 10)+lines("c", 0, 5), string(got), "offset/0 after the cluster was truncated")
	}
	got, err = os.ReadFile(filepath.Join(m.mp, "tr/0/offset/10"))
	if err == nil {
		require.Equal(t, lines("c", 0, 5), string(got), "offset/10 after the cluster was truncated")
	}
	m.stop(t)
}

// The same truncation while the mount runs: the broker goes away and comes
// back (same address) with a log that ends at 10 and other records from
// there. Files opened afterwards show the cluster's records, not the
// copy's old ones.
func TestAdv33cLiveCopyAheadOfTruncatedCluster(t *testing.T) {
	data := t.TempDir()
	snap := t.TempDir()
	start := (&restartable{t: t, id: "adv33c-live"}).start
	c := start(data)
	addr := c.ListenAddrs()[0]
	require.NoError(t, c.CreateTopic("tr", 1, nil))
	cl := client(t, c)
	produce(t, cl, "tr", 0, values("a", 10)...)
	cl.Close()
	c.Close()
	copyTreeAdv33c(t, data, snap)
	c = start(data)
	cl = client(t, c)
	produce(t, cl, "tr", 0, values("b", 10)...)
	cl.Close()
	props := kafka.Properties{"request.timeout.ms": "500", "default.api.timeout.ms": "3000", "metadata.max.age.ms": "300", "fetch.max.wait.ms": "100"}
	_, mp := mounted(t, c, kafka.Options{Brokers: []string{addr}, Properties: props}, fs.Options{})
	require.Equal(t, lines("a", 0, 10)+lines("b", 0, 10), readFile(t, filepath.Join(mp, "tr/0/offset/0")))
	c.Close()
	c = start(snap)
	require.EqualValues(t, 10, c.PartitionInfo("tr", 0).HighWatermark)
	produce(t, client(t, c), "tr", 0, values("c", 5)...)
	time.Sleep(1500 * time.Millisecond) // past what the last fetch said
	got, err := os.ReadFile(filepath.Join(mp, "tr/0/offset/0"))
	if err == nil {
		require.Equal(t, lines("a", 0, 10)+lines("c", 0, 5), string(got), "offset/0 after the cluster was truncated")
	}
	got, err = os.ReadFile(filepath.Join(mp, "tr/0/offset/10"))
	if err == nil {
		require.Equal(t, lines("c", 0, 5), string(got), "offset/10 after the cluster was truncated")
	}
}

// adv33cCopied starts a cluster whose topic holds records r0 to r19 in
// partition 0, and a mount that copies them all and stops; it returns the
// cluster, a client and the copy's directory.
func adv33cCopied(t *testing.T, topic string) (*kfake.Cluster, *kgo.Client, string) {
	t.Helper()
	c := fakeCluster(t, kfake.SeedTopics(1, topic))
	cl := client(t, c)
	for i := 0; i < 20; i += 2 {
		produce(t, cl, topic, 0, "r"+strconv.Itoa(i), "r"+strconv.Itoa(i+1))
	}
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("r", 0, 20), readFile(t, filepath.Join(m.mp, topic+"/0/offset/0")))
	m.stop(t)
	return c, cl, copyDir
}

// Records deleted on the cluster while logfs was down (DeleteRecords)
// are gone from the restarted mount too: their offsets are ENOENT, never
// served from the copy.
func TestAdv33cRestartAfterDeleteRecords(t *testing.T) {
	c, _, copyDir := adv33cCopied(t, "dr")

	require.NoError(t, c.DeleteRecords("dr", 0, 10))
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	dir := filepath.Join(m.mp, "dr/0")
	for _, n := range []string{"0", "5", "9"} {
		_, err := os.ReadFile(filepath.Join(dir, "offset", n))
		require.ErrorIs(t, err, os.ErrNotExist, "offset/%s below the cluster's log start", n)
	}
	require.Equal(t, lines("r", 10, 20), readFile(t, filepath.Join(dir, "offset/earliest")))
	m.stop(t)
}

// DeleteRecords to an offset inside a batch: the log start is inside the
// batch, and neither a fresh copy nor an existing one serves the records
// of that batch below it.
func TestAdv33cDeleteRecordsInsideABatch(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "ib", "ib2"))
	cl := client(t, c)
	produce(t, cl, "ib", 0, values("r", 10)...) // one batch, 0..9
	produce(t, cl, "ib2", 0, values("r", 10)...)
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	// ib2 is copied before the delete, ib after.
	require.Equal(t, lines("r", 0, 10), readFile(t, filepath.Join(mp, "ib2/0/offset/0")))
	require.NoError(t, c.DeleteRecords("ib", 0, 5))
	require.NoError(t, c.DeleteRecords("ib2", 0, 5))
	for _, topic := range []string{"ib", "ib2"} {
		dir := filepath.Join(mp, topic, "0")
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(filepath.Join(dir, "offset/earliest"))
			return err == nil && string(b) == lines("r", 5, 10)
		}, 5*time.Second, 50*time.Millisecond, "%s: earliest is the log start inside the batch", topic)
		_, err := os.ReadFile(filepath.Join(dir, "offset/3"))
		require.ErrorIs(t, err, os.ErrNotExist, topic)
		require.Equal(t, lines("r", 7, 10), readFile(t, filepath.Join(dir, "offset/7")), topic)
		require.Equal(t, lines("r", 5, 10), readFile(t, filepath.Join(dir, "offset/5")), topic)
	}
}

// Partitions added on the cluster while mounted appear within a few
// seconds and read.
func TestAdv33cPartitionsAddedOnTheCluster(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "grow"))
	cl := client(t, c)
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"metadata.max.age.ms": "500"}}, fs.Options{})
	_, err := os.Stat(filepath.Join(mp, "grow/2"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = kadm.NewClient(cl).CreatePartitions(context.Background(), 2, "grow")
	require.NoError(t, err)
	produce(t, cl, "grow", 2, "p2")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(mp, "grow/2/offset/0"))
		return err == nil && string(b) == "p2\n"
	}, 5*time.Second, 50*time.Millisecond, "a partition added on the cluster reads")
	ents, err := os.ReadDir(filepath.Join(mp, "grow"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Subset(t, names, []string{"0", "1", "2"})
}

// 4 KiB preads at random positions of files at several offsets, while the
// copy is made of many small segments and grows backwards under them,
// match a sequential read; several readers at once.
func TestAdv33cRandomPreadsMatchSequential(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "rnd"))
	cl := client(t, c)
	rng := rand.New(rand.NewSource(33))
	var vals []string
	for i := 0; i < 3000; i++ {
		vals = append(vals, strconv.Itoa(i)+"-"+strings.Repeat("x", rng.Intn(200)))
	}
	for i := 0; i < len(vals); i += 50 {
		produce(t, cl, "rnd", 0, vals[i:i+50]...)
	}
	_, mp := mounted(t, c, kafka.Options{CopySegmentBytes: 32 << 10}, fs.Options{})
	dir := filepath.Join(mp, "rnd/0/offset")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for _, from := range []int{2500, 1777, 0, 1000} {
		wg.Add(1)
		go func(from int) {
			defer wg.Done()
			want := strings.Join(vals[from:], "\n") + "\n"
			f, err := os.Open(filepath.Join(dir, strconv.Itoa(from)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			st, _ := f.Stat()
			if st.Size() != int64(len(want)) {
				errs <- errors.New("offset/" + strconv.Itoa(from) + ": size " + strconv.FormatInt(st.Size(), 10) + " want " + strconv.Itoa(len(want)))
				return
			}
			r := rand.New(rand.NewSource(int64(from)))
			buf := make([]byte, 4096)
			for i := 0; i < 300; i++ {
				off := r.Int63n(int64(len(want)))
				n, err := f.ReadAt(buf, off)
				if err != nil && err != io.EOF {
					errs <- err
					return
				}
				exp := want[off:min(off+4096, int64(len(want)))]
				if string(buf[:n]) != exp {
					errs <- errors.New("offset/" + strconv.Itoa(from) + ": pread at " + strconv.FormatInt(off, 10) + " differs")
					return
				}
			}
		}(from)
		time.Sleep(30 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, strings.Join(vals, "\n")+"\n", readFile(t, filepath.Join(dir, "0")))
}

// Batches compressed with each codec by another producer read as the
// records they hold, with keys, headers and binary values intact.
func TestAdv33cReadEveryCodec(t *testing.T) {
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	var topics []string
	for name := range codecs {
		topics = append(topics, name)
	}
	c := fakeCluster(t, kfake.SeedTopics(1, topics...))
	var want string
	var vals []string
	for i := 0; i < 500; i++ {
		v := "value " + strings.Repeat(strconv.Itoa(i), 20)
		vals = append(vals, v)
		want += v + "\n"
	}
	for name, codec := range codecs {
		cl := client(t, c, kgo.ProducerBatchCompression(codec))
		var recs []*kgo.Record
		for _, v := range vals {
			recs = append(recs, &kgo.Record{Topic: name, Value: []byte(v), Key: []byte{0, 1, 2},
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{0xff, 0}}}})
		}
		require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
	}
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	for name := range codecs {
		require.Equal(t, want, readFile(t, filepath.Join(mp, name, "0/offset/0")), name)
		require.Equal(t, strings.Join(vals[250:], "\n")+"\n", readFile(t, filepath.Join(mp, name, "0/offset/250")), name)
		jl := readFile(t, filepath.Join(mp, name, "0/offset/499.jsonl"))
		require.Contains(t, jl, `"offset":499`, name)
	}
}

// A full disk under the copy: reading a partition larger than the space
// left fails with an error in bounded time (no hang), serves nothing
// wrong, and the mount goes on serving what fits.
func TestAdv33cCopyDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	c := fakeCluster(t, kfake.SeedTopics(1, "full", "small"))
	cl := client(t, c)
	value := strings.Repeat("f", 1000)
	for i := 0; i < 30; i++ {
		produce(t, cl, "full", 0, values(value, 100)...) // 3 MB
	}
	produce(t, cl, "small", 0, "s0", "s1")
	props := kafka.Properties{"default.api.timeout.ms": "2000", "request.timeout.ms": "1000"}
	_, mp := mounted(t, c, kafka.Options{Dir: dir, Properties: props, CopySegmentBytes: 256 << 10}, fs.Options{})
	start := time.Now()
	got, err := os.ReadFile(filepath.Join(mp, "full/0/offset/0"))
	t.Logf("read of 3 MB on a 1 MB disk: %d bytes, %v, after %v", len(got), err, time.Since(start))
	require.Error(t, err, "3 MB cannot be copied to 1 MB")
	require.ErrorIs(t, err, syscall.ENOSPC, "the copy's disk is full: not a cluster timeout")
	require.Less(t, time.Since(start), 15*time.Second)
	require.True(t, strings.HasPrefix(lines(value, 0, 3000), string(got)), "what was served is the records")
	require.Equal(t, "s0\ns1\n", readFile(t, filepath.Join(mp, "small/0/offset/0")))
}

// A symbolic link planted in the copy between mounts, in place of a
// segment, is not followed: the restarted mount serves the cluster's
// records, never the link target's.
func TestAdv33cSymlinkPlantedInCopy(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "sy", "other"))
	cl := client(t, c)
	produce(t, cl, "sy", 0, values("good", 20)...)
	produce(t, cl, "other", 0, values("evil", 20)...)
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, lines("good", 0, 20), readFile(t, filepath.Join(m.mp, "sy/0/offset/0")))
	require.Equal(t, lines("evil", 0, 20), readFile(t, filepath.Join(m.mp, "other/0/offset/0")))
	m.stop(t)

	seg := filepath.Join(copyDir, "sy-0", "00000000000000000000.log")
	evil := filepath.Join(t.TempDir(), "evil.log")
	b, err := os.ReadFile(filepath.Join(copyDir, "other-0", "00000000000000000000.log"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(evil, b, 0o600))
	require.NoError(t, os.Remove(seg))
	require.NoError(t, os.Symlink(evil, seg))

	m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	got, err := os.ReadFile(filepath.Join(m.mp, "sy/0/offset/0"))
	require.NoError(t, err)
	require.Equal(t, lines("good", 0, 20), string(got))
	m.stop(t)
	after, err := os.ReadFile(evil)
	require.NoError(t, err)
	require.Equal(t, b, after, "the link's target is untouched")
}

// An append file open on a topic deleted on the cluster: a write fails
// with an error within delivery.timeout.ms, never hangs, and never
// produces into a topic created again under the name.
func TestAdv33cAppendToDeletedTopic(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "dt"))
	props := kafka.Properties{"delivery.timeout.ms": "1500", "request.timeout.ms": "500", "default.api.timeout.ms": "1500", "metadata.max.age.ms": "300"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	f, err := os.OpenFile(filepath.Join(mp, "dt/0/append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte("first\n"))
	require.NoError(t, err)
	require.NoError(t, c.DeleteTopic("dt"))
	start := time.Now()
	_, err = f.Write([]byte("after delete\n"))
	t.Logf("write after delete: %v after %v", err, time.Since(start))
	require.Error(t, err)
	require.Less(t, time.Since(start), 10*time.Second)
}

// A mount of an address where nothing listens fails in bounded time with
// a clear error, not a hang.
func TestAdv33cOpenNothingListens(t *testing.T) {
	c := fakeCluster(t)
	addr := c.ListenAddrs()[0]
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	kc, err := kafka.Open(ctx, kafka.Options{Brokers: []string{addr}, Dir: t.TempDir(), Logger: testLogger(t),
		Properties: kafka.Properties{"default.api.timeout.ms": "2000", "request.timeout.ms": "1000"}})
	if kc != nil {
		kc.Close()
	}
	require.Error(t, err)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Contains(t, err.Error(), addr)
}

// mountAdv33c opens and mounts the cluster on a copy in dir and returns a
// function that unmounts and closes it (also run at the test's end).
func mountAdv33c(t *testing.T, c *kfake.Cluster, dir string, props kafka.Properties) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kc, err := kafka.Open(ctx, kafka.Options{Brokers: c.ListenAddrs(), Dir: dir, Logger: testLogger(t), Properties: props})
	require.NoError(t, err)
	mp := t.TempDir()
	srv, err := fs.Mount(mp, kc.Log(), fs.Options{Cluster: kc, Logger: testLogger(t)})
	if err != nil {
		kc.Close()
		t.Fatalf("mount: %v", err)
	}
	var once sync.Once
	done := func() {
		once.Do(func() {
			deadline := time.Now().Add(10 * time.Second)
			for srv.Unmount() != nil {
				if time.Now().After(deadline) {
					syscall.Unmount(mp, syscall.MNT_DETACH)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			kc.Close()
		})
	}
	t.Cleanup(done)
	return mp, done
}

// A copy made at read_uncommitted holds aborted records; a later mount
// at read_committed on the same copy never shows them.
func TestAdv33cIsolationChangeOnTheSameCopy(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "iso"))
	txn := client(t, c, kgo.TransactionalID("adv33c-iso"))
	plain := client(t, c)
	produce(t, plain, "iso", 0, "p0")
	transact(t, txn, "iso", false, "aborted1", "aborted2")
	produce(t, plain, "iso", 0, "p1")
	copyDir := t.TempDir()
	mp, done := mountAdv33c(t, c, copyDir, kafka.Properties{"isolation.level": "read_uncommitted"})
	require.Equal(t, "p0\naborted1\naborted2\np1\n", readFile(t, filepath.Join(mp, "iso/0/offset/0")))
	done()
	mp, done = mountAdv33c(t, c, copyDir, nil)
	require.Equal(t, "p0\np1\n", readFile(t, filepath.Join(mp, "iso/0/offset/0")))
	_, err := os.Stat(filepath.Join(mp, "iso/0/offset/1"))
	if err == nil {
		b, _ := os.ReadFile(filepath.Join(mp, "iso/0/offset/1"))
		require.Equal(t, "p1\n", string(b), "offset/1 under read_committed")
	}
	done()
}

// An aborted transaction of several batches, fetched one batch per
// response, is left out whole under read_committed; a committed one stays.
func TestAdv33cAbortedTransactionAcrossFetches(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "ab"))
	txn := client(t, c, kgo.TransactionalID("adv33c-ab"))
	plain := client(t, c)
	produce(t, plain, "ab", 0, "p0")
	require.NoError(t, txn.BeginTransaction())
	for i := 0; i < 6; i++ {
		produce(t, txn, "ab", 0, "x"+strconv.Itoa(i)) // a batch each
		if i == 2 {
			produce(t, plain, "ab", 0, "p1")
		}
	}
	require.NoError(t, txn.EndTransaction(context.Background(), kgo.TryAbort))
	transact(t, txn, "ab", true, "c0", "c1")
	produce(t, plain, "ab", 0, "p2")
	props := kafka.Properties{"fetch.max.bytes": "1024", "max.partition.fetch.bytes": "1024"}
	// One batch per response: the brokers are asked for 1 byte.
	var fetches atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.FetchRequest)
		r.MaxBytes = 1
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].PartitionMaxBytes = 1
			}
		}
		fetches.Add(1)
		return nil, nil, false
	})
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	require.Equal(t, "p0\np1\nc0\nc1\np2\n", readFile(t, filepath.Join(mp, "ab/0/offset/0")))
	// From inside the aborted transaction, a copy started there.
	_, mp2 := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	require.Equal(t, "p1\nc0\nc1\np2\n", readFile(t, filepath.Join(mp2, "ab/0/offset/3")))
	require.Greater(t, fetches.Load(), int64(10), "one batch per fetch")
}

// A byte of a record flipped in the copy between mounts is never served:
// the restarted mount shows the cluster's records or an error.
func TestAdv33cCorruptCopyNotServed(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "cc"))
	cl := client(t, c)
	for i := 0; i < 10; i++ {
		produce(t, cl, "cc", 0, "value-"+strconv.Itoa(i))
	}
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	want := lines("value-", 0, 10)
	require.Equal(t, want, readFile(t, filepath.Join(m.mp, "cc/0/offset/0")))
	m.stop(t)
	seg := filepath.Join(copyDir, "cc-0", "00000000000000000000.log")
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	i := strings.Index(string(b), "value-5")
	require.Positive(t, i)
	b[i] = 'V'
	require.NoError(t, os.WriteFile(seg, b, 0o600))
	m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	got, err := os.ReadFile(filepath.Join(m.mp, "cc/0/offset/0"))
	t.Logf("read: %v", err)
	require.True(t, strings.HasPrefix(want, string(got)), "served %q", got)
	require.NotContains(t, string(got), "Value-5")
	got, err = os.ReadFile(filepath.Join(m.mp, "cc/0/offset/5"))
	if err == nil {
		require.Equal(t, lines("value-", 5, 10), string(got))
	}
	m.stop(t)
}

// The copy of one cluster is refused for another.
func TestAdv33cCopyOfAnotherCluster(t *testing.T) {
	a := fakeCluster(t, kfake.SeedTopics(1, "same"), kfake.ClusterID("adv33c-a"))
	b := fakeCluster(t, kfake.SeedTopics(1, "same"), kfake.ClusterID("adv33c-b"))
	produce(t, client(t, a), "same", 0, "from-a")
	produce(t, client(t, b), "same", 0, "from-b")
	copyDir := t.TempDir()
	mp, done := mountAdv33c(t, a, copyDir, nil)
	require.Equal(t, "from-a\n", readFile(t, filepath.Join(mp, "same/0/offset/0")))
	done()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kc, err := kafka.Open(ctx, kafka.Options{Brokers: b.ListenAddrs(), Dir: copyDir, Logger: testLogger(t)})
	if err == nil {
		kc.Close()
	}
	require.Error(t, err, "a copy of cluster a opened for cluster b")
}

// An append the broker refuses for good (a record it finds invalid, a
// policy, an authorization, a corrupt message answer) fails the write
// with an errno in bounded time, produces nothing of it, and the next
// write on the same file goes in once.
func TestAdv33cAppendRefusedByTheBroker(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.InvalidRecord, kerr.PolicyViolation, kerr.TopicAuthorizationFailed,
		kerr.InvalidTimestamp, kerr.UnknownServerError} {
		t.Run(code.Message, func(t *testing.T) {
			c := fakeCluster(t, kfake.SeedTopics(1, "rf"))
			props := kafka.Properties{"delivery.timeout.ms": "2000", "request.timeout.ms": "500", "retry.backoff.ms": "50"}
			_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
			path := filepath.Join(mp, "rf/0/append")
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			defer f.Close()
			_, err = f.Write([]byte("first\n"))
			require.NoError(t, err)
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "rf", Err: code, Count: 1})
			start := time.Now()
			_, err = f.Write([]byte("refused\n"))
			t.Logf("refused write: %v after %v", err, time.Since(start))
			require.Less(t, time.Since(start), 5*time.Second)
			refused := err != nil
			_, err = f.Write([]byte("second\n"))
			require.NoError(t, err, "the next write on the same file")
			_, err = appendTo(path, []byte("third\n"))
			require.NoError(t, err, "a write on another open")
			want := "first\nsecond\nthird\n"
			if !refused {
				want = "first\nrefused\nsecond\nthird\n" // retried: once
			}
			require.Equal(t, want, readFile(t, filepath.Join(mp, "rf/0/offset/0")))
		})
	}
}

// Records with huge binary keys, values and headers (near the broker's
// limit, newlines and NULs inside) render as locally, and 4 KiB preads at
// random positions match a sequential read.
func TestAdv33cHugeBinaryRecords(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "hb"))
	cl := client(t, c, kgo.ProducerBatchMaxBytes(2<<20))
	rng := rand.New(rand.NewSource(7))
	blob := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	base := time.UnixMilli(1_700_000_000_000)
	var recs []storage.Record
	for i := 0; i < 6; i++ {
		r := storage.Record{Timestamp: base.Add(time.Duration(i) * time.Second).UnixMilli()}
		switch i {
		case 0:
			r.Value = blob(900 << 10)
		case 1:
			r.Key, r.Value = blob(300<<10), blob(300<<10)
		case 2:
			r.Value = []byte("a\nb\x00c\n")
			r.Headers = []record.Header{{Key: blob(100 << 10), Value: blob(200 << 10)}}
		case 3:
			r.Value = nil
			r.Key = blob(10)
		case 4:
			r.Value = []byte{}
		case 5:
			r.Value = blob(500 << 10)
		}
		kr := &kgo.Record{Topic: "hb", Timestamp: time.UnixMilli(r.Timestamp), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
		}
		require.NoError(t, cl.ProduceSync(context.Background(), kr).FirstErr())
		recs = append(recs, r)
	}
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	for _, f := range []storage.Format{storage.Values, storage.JSONL} {
		name := "0"
		if f == storage.JSONL {
			name = "0.jsonl"
		}
		want := localRendering(t, recs, f, 0)
		path := filepath.Join(mp, "hb/0/offset", name)
		require.True(t, want == readFile(t, path), "offset/%s differs from the local rendering", name)
		fh, err := os.Open(path)
		require.NoError(t, err)
		buf := make([]byte, 4096)
		for i := 0; i < 200; i++ {
			off := rng.Int63n(int64(len(want)))
			n, err := fh.ReadAt(buf, off)
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
			}
			require.True(t, want[off:min(off+4096, int64(len(want)))] == string(buf[:n]), "%s: pread at %d", name, off)
		}
		fh.Close()
	}
}

// A copy that ran out of disk recovers once space is freed: the file then
// reads whole and exact, with nothing torn or doubled from the failed
// writes.
func TestAdv33cCopyDiskFullThenFreed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	c := fakeCluster(t, kfake.SeedTopics(1, "full"))
	cl := client(t, c)
	value := strings.Repeat("f", 1000)
	for i := 0; i < 30; i++ {
		produce(t, cl, "full", 0, values(value+strconv.Itoa(i)+"-", 100)...) // 3 MB
	}
	var want strings.Builder
	for i := 0; i < 30; i++ {
		want.WriteString(lines(value+strconv.Itoa(i)+"-", 0, 100))
	}
	props := kafka.Properties{"default.api.timeout.ms": "1500", "request.timeout.ms": "1000"}
	_, mp := mounted(t, c, kafka.Options{Dir: dir, Properties: props, CopySegmentBytes: 256 << 10}, fs.Options{})
	_, err := os.ReadFile(filepath.Join(mp, "full/0/offset/0"))
	require.Error(t, err)
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=16m"))
	var got []byte
	require.Eventually(t, func() bool {
		got, err = os.ReadFile(filepath.Join(mp, "full/0/offset/0"))
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "reads once there is space: %v", err)
	require.True(t, want.String() == string(got), "the copy after a full disk: %d bytes, want %d", len(got), want.Len())
	require.Equal(t, lines(value+"29-", 50, 100), readFile(t, filepath.Join(mp, "full/0/offset/2950")))
}

// A copy started at an offset inside a batch (the fetch returns the whole
// batch) and then grown backwards to offsets of that same batch shows
// every record once, in order.
func TestAdv33cGrowBackwardsIntoTheFirstBatch(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "gb"))
	cl := client(t, c)
	produce(t, cl, "gb", 0, values("r", 100)...) // one batch, 0..99
	for i := 100; i < 300; i += 50 {
		vs := make([]string, 50)
		for j := range vs {
			vs[j] = "r" + strconv.Itoa(i+j)
		}
		produce(t, cl, "gb", 0, vs...)
	}
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "gb/0/offset")
	require.Equal(t, lines("r", 50, 300), readFile(t, filepath.Join(dir, "50")))
	f, err := os.Open(filepath.Join(dir, "60"))
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, lines("r", 10, 300), readFile(t, filepath.Join(dir, "10")))
	require.Equal(t, lines("r", 0, 300), readFile(t, filepath.Join(dir, "0")))
	require.Equal(t, lines("r", 49, 300), readFile(t, filepath.Join(dir, "49")))
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, lines("r", 60, 300), string(b), "the file open before the copy grew")
}

// Records deleted on the cluster while logfs was down, past everything
// the copy held: the restarted mount serves the cluster's records from
// the new log start, and none of the copy's.
func TestAdv33cRestartAfterDeleteRecordsPastTheCopy(t *testing.T) {
	c, cl, copyDir := adv33cCopied(t, "dp")
	for i := 20; i < 30; i += 2 {
		produce(t, cl, "dp", 0, "r"+strconv.Itoa(i), "r"+strconv.Itoa(i+1))
	}
	require.NoError(t, c.DeleteRecords("dp", 0, 25))
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	dir := filepath.Join(m.mp, "dp/0")
	require.Equal(t, lines("r", 25, 30), readFile(t, filepath.Join(dir, "offset/earliest")))
	for _, n := range []string{"0", "19", "22"} {
		_, err := os.ReadFile(filepath.Join(dir, "offset", n))
		require.ErrorIs(t, err, os.ErrNotExist, "offset/%s", n)
	}
	require.Equal(t, lines("r", 27, 30), readFile(t, filepath.Join(dir, "offset/27")))
	m.stop(t)
}

// time/T before every record, after DeleteRecords inside a batch: the
// file starts at the log start, as offset/earliest, never with deleted
// records.
func TestAdv33cTimeLookupAfterDeleteRecords(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "td"))
	cl := client(t, c)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: "td", Value: []byte("r" + strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr()) // one batch
	require.NoError(t, c.DeleteRecords("td", 0, 5))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "td/0")
	require.Equal(t, lines("r", 5, 10), readFile(t, filepath.Join(dir, "offset/earliest")))
	for _, ts := range []time.Time{time.UnixMilli(0), base, base.Add(2 * time.Second)} {
		got, err := os.ReadFile(filepath.Join(dir, "time", strconv.FormatInt(ts.UnixMilli(), 10)))
		require.NoError(t, err, "time/%d", ts.UnixMilli())
		require.Equal(t, lines("r", 5, 10), string(got), "time/%d", ts.UnixMilli())
	}
	require.Equal(t, lines("r", 7, 10), readFile(t, filepath.Join(dir, "time", strconv.FormatInt(base.Add(7*time.Second).UnixMilli(), 10))))
}

// The copy's segment cut short, or removed, between mounts (after a clean
// stop): the restarted mount shows the cluster's records or an error,
// never a record twice, out of order, or missing from the middle.
func TestAdv33cCopySegmentDamagedBetweenMounts(t *testing.T) {
	for _, how := range []string{"truncate-mid-batch", "truncate-at-batch", "remove-log", "remove-all-but-log", "empty-log"} {
		t.Run(how, func(t *testing.T) {
			c := fakeCluster(t, kfake.SeedTopics(1, "dm"))
			cl := client(t, c)
			for i := 0; i < 40; i += 4 {
				produce(t, cl, "dm", 0, values("r", 40)[i:i+4]...)
			}
			want := lines("r", 0, 40)
			copyDir := t.TempDir()
			m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
			require.Equal(t, want, readFile(t, filepath.Join(m.mp, "dm/0/offset/0")))
			m.stop(t)
			pdir := filepath.Join(copyDir, "dm-0")
			seg := filepath.Join(pdir, "00000000000000000000.log")
			st, err := os.Stat(seg)
			require.NoError(t, err)
			switch how {
			case "truncate-mid-batch":
				require.NoError(t, os.Truncate(seg, st.Size()/2+3))
			case "truncate-at-batch":
				b, _ := os.ReadFile(seg)
				i := strings.Index(string(b), "r20")
				require.Positive(t, i)
				// back to the start of the batch holding r20: 4 records of
				// about 10 bytes after a 61-byte header.
				require.NoError(t, os.Truncate(seg, int64(i)-61-14))
			case "remove-log":
				require.NoError(t, os.Remove(seg))
			case "remove-all-but-log":
				ents, _ := os.ReadDir(pdir)
				for _, e := range ents {
					if e.Name() != "00000000000000000000.log" {
						os.Remove(filepath.Join(pdir, e.Name()))
					}
				}
			case "empty-log":
				require.NoError(t, os.Truncate(seg, 0))
			}
			produce(t, cl, "dm", 0, "r40")
			want += "r40\n"
			m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
			for _, from := range []int{0, 10, 30, 40} {
				got, err := os.ReadFile(filepath.Join(m.mp, "dm/0/offset", strconv.Itoa(from)))
				w := lines("r", from, 41)
				if err != nil {
					t.Logf("offset/%d: %v (%d bytes)", from, err, len(got))
					require.True(t, strings.HasPrefix(w, string(got)), "offset/%d served %q before the error", from, got)
					continue
				}
				require.Equal(t, w, string(got), "offset/%d", from)
			}
			m.stop(t)
		})
	}
}

// On a cluster that creates topics on first use (auto.create.topics,
// as kfakeserve runs), looking up, reading or appending to a name that is
// no topic is ENOENT and creates nothing.
func TestAdv33cLookupsCreateNoTopic(t *testing.T) {
	c := fakeCluster(t, kfake.AllowAutoTopicCreation(), kfake.SeedTopics(1, "real"))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	for _, name := range []string{"ghost", "ghost/0", "ghost/0/offset/0", "ghost/0/append", "ghost2/0/info"} {
		_, err := os.Stat(filepath.Join(mp, name))
		require.ErrorIs(t, err, os.ErrNotExist, name)
	}
	_, err := os.ReadFile(filepath.Join(mp, "ghost3/0/offset/0"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = appendTo(filepath.Join(mp, "ghost4/0/append"), []byte("x\n"))
	require.Error(t, err)
	time.Sleep(200 * time.Millisecond)
	for _, name := range []string{"ghost", "ghost2", "ghost3", "ghost4"} {
		require.Nil(t, c.TopicInfo(name), "topic %s was created by a lookup", name)
	}
}

// A topic deleted on the cluster while an open waits for its copy: the
// open fails soon (the topic is gone), not after default.api.timeout.ms,
// and what it served is the topic's records.
func TestAdv33cTopicDeletedDuringCopy(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "dd"))
	cl := client(t, c)
	vals := values(strings.Repeat("d", 1000), 300)
	for i := 0; i < len(vals); i += 10 {
		produce(t, cl, "dd", 0, vals[i:i+10]...)
	}
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		time.Sleep(50 * time.Millisecond)
		return nil, nil, false
	})
	props := kafka.Properties{"default.api.timeout.ms": "20000", "fetch.max.bytes": "1024", "max.partition.fetch.bytes": "1024", "metadata.max.age.ms": "300"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	done := make(chan error, 1)
	var got []byte
	go func() {
		var err error
		got, err = os.ReadFile(filepath.Join(mp, "dd/0/offset/0"))
		done <- err
	}()
	time.Sleep(400 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("premise: the copy took longer than 400 ms")
	default:
	}
	require.NoError(t, c.DeleteTopic("dd"))
	start := time.Now()
	select {
	case err := <-done:
		t.Logf("open after delete: %v after %v", err, time.Since(start))
		if err == nil {
			require.Equal(t, strings.Join(vals, "\n")+"\n", string(got))
		}
	case <-time.After(4 * time.Second):
		t.Fatalf("the open still waits %v after the topic was deleted", time.Since(start))
	}
}

// Many readers of one partition opening at once, at offsets far apart,
// on a mount that has copied nothing: each reads exactly its records.
func TestAdv33cSimultaneousReadersFarApart(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "sim"))
	cl := client(t, c)
	vals := values(strings.Repeat("s", 300)+"-", 6000) // 1.8 MB
	for i := 0; i < len(vals); i += 200 {
		produce(t, cl, "sim", 0, vals[i:i+200]...)
	}
	for round := 0; round < 3; round++ {
		_, mp := mounted(t, c, kafka.Options{CopySegmentBytes: 128 << 10}, fs.Options{})
		froms := []int{5999, 0, 3000, 150, 4444, 1, 2999, 6000}
		var wg sync.WaitGroup
		errs := make([]error, len(froms))
		gate := make(chan struct{})
		for i, from := range froms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				b, err := os.ReadFile(filepath.Join(mp, "sim/0/offset", strconv.Itoa(from)))
				want := ""
				if from < len(vals) {
					want = strings.Join(vals[from:], "\n") + "\n"
				}
				if err == nil && string(b) != want {
					err = errors.New("offset/" + strconv.Itoa(from) + ": wrong records, " + strconv.Itoa(len(b)) + " bytes, want " + strconv.Itoa(len(want)))
				}
				errs[i] = err
			}()
		}
		close(gate)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err, "round %d", round)
		}
	}
}

// A "broker" on 127.0.0.1 that accepts connections and never answers: the
// mount's open gives up within its bound with a clear error.
func TestAdv33cOpenBrokerNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var conns sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Wait()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	start := time.Now()
	kc, err := kafka.Open(context.Background(), kafka.Options{Brokers: []string{ln.Addr().String()}, Dir: t.TempDir(), Logger: testLogger(t),
		Properties: kafka.Properties{"default.api.timeout.ms": "1500", "request.timeout.ms": "1000"}})
	if kc != nil {
		kc.Close()
	}
	t.Logf("open: %v after %v", err, time.Since(start))
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
}
