package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// A retry of an append keeps the producer id and sequence numbers of its
// first attempt, even when an append to another partition started a new
// producer id meanwhile: a retry under the new id would be a second copy.
func TestMountRetryKeepsItsProducerID(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(2, "dup"))
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"retry.backoff.ms": "800"}}, fs.Options{})
	for _, p := range []string{"0", "1"} {
		_, err := appendTo(filepath.Join(mp, "dup", p, "append"), []byte("warm-"+p+"\n"))
		require.NoError(t, err)
	}
	late := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "dup", Partitions: []int32{0}, Err: kerr.RequestTimedOut, Count: 1})
	done := make(chan error, 1)
	go func() {
		_, err := appendTo(filepath.Join(mp, "dup/0/append"), []byte("once\n"))
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, late.Wait(ctx, 1)) // applied, answered REQUEST_TIMED_OUT; the retry waits 0.8 s
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "dup", Partitions: []int32{1}, Err: kerr.OutOfOrderSequenceNumber, Count: 1})
	_, err := appendTo(filepath.Join(mp, "dup/1/append"), []byte("p1\n"))
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.Equal(t, "warm-0\nonce\n", readFile(t, filepath.Join(mp, "dup/0/offset/0")))
	require.Equal(t, "warm-1\np1\n", readFile(t, filepath.Join(mp, "dup/1/offset/0")))
}

// A write of many batches sends them without waiting for each answer;
// whatever one of them meets, the partition ends up with every line of
// the write once, in order (the writer sends again what a short write
// left), and the copy holds batches of at most max.message.bytes.
func TestMountPipelinedAppendFaults(t *testing.T) {
	for name, code := range map[string]*kerr.Error{
		"refused":        kerr.MessageTooLarge,
		"corrupt":        kerr.CorruptMessage,
		"overtaken":      kerr.OutOfOrderSequenceNumber,
		"applied-late":   kerr.RequestTimedOut,
		"leader-moved":   kerr.NotLeaderForPartition,
		"unknown-pid":    kerr.UnknownProducerID,
		"fenced":         kerr.InvalidProducerEpoch,
		"not-replicated": kerr.NotEnoughReplicasAfterAppend,
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeCluster(t)
			adm := kadm.NewClient(client(t, c))
			max := "4096"
			_, err := adm.CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &max}, "pipe")
			require.NoError(t, err)
			kc, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"retry.backoff.ms": "10"}}, fs.Options{})
			path := filepath.Join(mp, "pipe/0/append")
			var data bytes.Buffer
			for i := 0; i < 400; i++ {
				fmt.Fprintf(&data, "%s%d\n", strings.Repeat("p", 95), 1000+i) // 40 KB: ten batches
			}
			// The fault meets a batch after the write's first, whatever
			// order the requests arrive in.
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "pipe", Err: code, Count: 1,
				When: func(req kmsg.Request) bool { return firstSequence(req) > 0 }})
			n, err := appendTo(path, data.Bytes())
			require.NoError(t, err)
			require.Equal(t, data.Len(), n)
			sameText(t, data.String(), readFile(t, filepath.Join(mp, "pipe/0/offset/0")))
			recs := consumeAll(t, c, "pipe", 0, 400)
			require.Len(t, recs, 400)
			for _, h := range copyBatches(t, kc, "pipe", 0) {
				require.LessOrEqual(t, h.Size(), int64(4096))
			}
		})
	}
}

// sameText fails t at the first line where got differs from want, without
// printing megabytes.
func sameText(t testing.TB, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < min(len(wl), len(gl)); i++ {
		if wl[i] != gl[i] {
			t.Fatalf("line %d: want %.80q, got %.80q (%d lines wanted, %d got)", i, wl[i], gl[i], len(wl), len(gl))
		}
	}
	t.Fatalf("%d lines wanted, %d got", len(wl), len(gl))
}

// firstSequence is the base sequence of the batch of a one-partition
// produce request.
func firstSequence(req kmsg.Request) int32 {
	for _, t := range req.(*kmsg.ProduceRequest).Topics {
		for _, p := range t.Partitions {
			if len(p.Records) >= 57 {
				return int32(binary.BigEndian.Uint32(p.Records[53:57]))
			}
		}
	}
	return -1
}

// A writer interrupted while its append is on the way to the broker gets
// the append's true outcome, not EINTR: Go (and any program that writes
// again after EINTR) would otherwise append the same line twice.
func TestMountInterruptedAppendAppearsOnce(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "sig"))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	path := filepath.Join(mp, "sig/0/append")
	_, err := appendTo(path, []byte("warm\n"))
	require.NoError(t, err)

	release := make(chan struct{})
	var held atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if held.CompareAndSwap(false, true) {
			c.SleepControl(func() { <-release }) // the broker is slow with this one
		}
		return nil, nil, false
	})
	// bash runs its trap after the write, which the signal interrupts.
	cmd := exec.Command("bash", "-c", `trap true INT; echo ready; echo once >> "$1" && echo written`, "bash", path)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	stdout := bufio.NewReader(out)
	line, err := stdout.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	require.Eventually(t, held.Load, 5*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	time.Sleep(300 * time.Millisecond) // the interrupt reached the mount
	close(release)
	rest, _ := io.ReadAll(stdout)
	require.NoError(t, cmd.Wait(), "the write was reported failed")
	require.Equal(t, "written\n", string(rest))
	require.Equal(t, "warm\nonce\n", readFile(t, filepath.Join(mp, "sig/0/offset/0")))
}
