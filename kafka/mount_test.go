package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/kafka"
)

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakeCluster starts a kfake cluster on 127.0.0.1, closed when the test ends.
func fakeCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1)}, opts...) // kfake listens on 127.0.0.1
	c, err := kfake.NewCluster(opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// client is a franz-go client of the fake cluster, for the test's own
// produces; uncompressed, so that sizes are what the test wrote.
func client(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// produce writes values to topic/partition, each record in its own call
// unless batch.
func produce(t testing.TB, cl *kgo.Client, topic string, partition int32, values ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// mounted opens a Cluster on the fake one and mounts it; both go when the
// test ends.
func mounted(t testing.TB, c *kfake.Cluster, o kafka.Options, fo fs.Options) (*kafka.Cluster, string) {
	t.Helper()
	fusetest.Require(t)
	if o.Brokers == nil {
		o.Brokers = c.ListenAddrs()
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kc, err := kafka.Open(ctx, o)
	require.NoError(t, err)
	mp := t.TempDir()
	fo.Cluster = kc
	if fo.Logger == nil {
		fo.Logger = o.Logger
	}
	srv, err := fs.Mount(mp, kc.Log(), fo)
	if errors.Is(err, fs.ErrNoFUSE) {
		kc.Close()
		fusetest.Unusable(t, err.Error())
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := srv.Unmount()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("unmount: %v; detaching", err)
				syscall.Unmount(mp, syscall.MNT_DETACH)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.NoError(t, kc.Close())
	})
	return kc, mp
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func lines(prefix string, from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
	}
	return b.String()
}

func TestMountListsAndReads(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(2, "orders"))
	cl := client(t, c)
	var vals []string
	for i := 0; i < 100; i++ {
		vals = append(vals, fmt.Sprintf("v%d", i))
	}
	produce(t, cl, "orders", 0, vals...)
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})

	entries, err := os.ReadDir(mp)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Contains(t, names, "orders")
	parts, err := os.ReadDir(filepath.Join(mp, "orders"))
	require.NoError(t, err)
	require.Len(t, parts, 2)

	require.Equal(t, lines("v", 0, 100), readFile(t, filepath.Join(mp, "orders/0/offset/0")))
	require.Equal(t, lines("v", 42, 100), readFile(t, filepath.Join(mp, "orders/0/offset/42")))
	st, err := os.Stat(filepath.Join(mp, "orders/0/offset/42"))
	require.NoError(t, err)
	require.EqualValues(t, len(lines("v", 42, 100)), st.Size())
	require.Equal(t, "", readFile(t, filepath.Join(mp, "orders/0/offset/latest")))
	require.Equal(t, "", readFile(t, filepath.Join(mp, "orders/1/offset/0")))
	_, err = os.Stat(filepath.Join(mp, "orders/0/offset/101"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
