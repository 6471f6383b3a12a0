package kafka_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/kafka"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// localRendering renders recs as a local mount would: they are appended
// to a data directory of its own and read back through a storage view.
func localRendering(t *testing.T, recs []storage.Record, f storage.Format, from record.Offset) string {
	t.Helper()
	l, err := storage.Open(t.TempDir(), storage.Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	defer l.Close()
	topic, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := topic.Partition(0)
	for _, r := range recs {
		_, err := p.Append([]storage.Record{r})
		require.NoError(t, err)
	}
	v, err := p.NewView(f, from)
	require.NoError(t, err)
	defer v.Close()
	size, err := v.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	n, _ := v.ReadAt(b, 0)
	require.EqualValues(t, size, n)
	return string(b)
}

// Every view of a cluster's partition is byte for byte what a local mount
// shows for the same records: keys, headers, timestamps, null values,
// bytes that are not UTF-8; offset/N, .jsonl, time/T in each of its forms,
// earliest, latest, and info.
func TestMountViewsAsLocally(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "events"))
	cl := client(t, c)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []storage.Record
	var krecs []*kgo.Record
	for i := 0; i < 300; i++ {
		r := storage.Record{Timestamp: base.Add(time.Duration(i) * time.Second).UnixMilli(), Value: []byte("value-" + strconv.Itoa(i))}
		switch i % 5 {
		case 1:
			r.Key = []byte("key-" + strconv.Itoa(i))
		case 2:
			r.Headers = []record.Header{{Key: []byte("h"), Value: []byte("x" + strconv.Itoa(i))}, {Key: []byte("n")}}
		case 3:
			r.Value = nil
		case 4:
			r.Value = []byte{0xff, 0xfe, byte(i)}
		}
		recs = append(recs, r)
		kr := &kgo.Record{Topic: "events", Timestamp: time.UnixMilli(r.Timestamp), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
		}
		krecs = append(krecs, kr)
	}
	// In several produce calls, so that there are several batches.
	for i := 0; i < len(krecs); i += 37 {
		require.NoError(t, cl.ProduceSync(context.Background(), krecs[i:min(i+37, len(krecs))]...).FirstErr())
	}
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "events/0")

	for _, from := range []record.Offset{0, 1, 36, 37, 150, 299, 300} {
		for _, f := range []storage.Format{storage.Values, storage.JSONL} {
			name := strconv.Itoa(int(from))
			if f == storage.JSONL {
				name += ".jsonl"
			}
			require.Equal(t, localRendering(t, recs, f, from), readFile(t, filepath.Join(dir, "offset", name)), "offset/%s", name)
		}
	}
	at := base.Add(100*time.Second + 500*time.Millisecond) // between records 100 and 101
	for name, from := range map[string]record.Offset{
		strconv.FormatInt(at.Unix(), 10):                         100, // whole seconds: 100.0 s, record 100's stamp
		strconv.FormatInt(at.UnixMilli(), 10):                    101,
		at.UTC().Format(time.RFC3339Nano):                        101,
		at.In(time.FixedZone("", 3600)).Format(time.RFC3339Nano): 101,
	} {
		require.Equal(t, localRendering(t, recs, storage.Values, from), readFile(t, filepath.Join(dir, "time", name)), "time/%s", name)
		require.Equal(t, localRendering(t, recs, storage.JSONL, from), readFile(t, filepath.Join(dir, "time", name+".jsonl")), "time/%s.jsonl", name)
	}
	require.Equal(t, "", readFile(t, filepath.Join(dir, "time", strconv.FormatInt(base.Add(time.Hour).Unix(), 10))))
	require.Equal(t, localRendering(t, recs, storage.Values, 0), readFile(t, filepath.Join(dir, "offset/earliest")))
	require.Equal(t, "", readFile(t, filepath.Join(dir, "offset/latest")))

	var info struct {
		LogStart record.Offset `json:"log_start_offset"`
		LogEnd   record.Offset `json:"log_end_offset"`
	}
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "info"))), &info))
	require.EqualValues(t, 0, info.LogStart)
	require.EqualValues(t, 300, info.LogEnd)
}

// st_size is exact, pread anywhere matches the sequential bytes, tail -n
// answers, and tail -f follows records produced while it runs.
func TestMountSizesPreadTail(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "log"))
	cl := client(t, c)
	var vals []string
	for i := 0; i < 5000; i++ {
		vals = append(vals, strings.Repeat("x", i%97)+strconv.Itoa(i))
	}
	for i := 0; i < len(vals); i += 500 {
		produce(t, cl, "log", 0, vals[i:i+500]...)
	}
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	path := filepath.Join(mp, "log/0/offset/0")
	want := strings.Join(vals, "\n") + "\n"
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.EqualValues(t, len(want), st.Size())
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		off := rng.Intn(len(want))
		n := 1 + rng.Intn(9000)
		b := make([]byte, n)
		k, err := f.ReadAt(b, int64(off))
		if k < n {
			require.ErrorIs(t, err, io.EOF)
		}
		require.Equal(t, want[off:min(off+n, len(want))], string(b[:k]), "pread %d at %d", n, off)
	}
	out, err := exec.Command("tail", "-n", "3", path).Output()
	require.NoError(t, err)
	require.Equal(t, strings.Join(vals[len(vals)-3:], "\n")+"\n", string(out))

	// tail -f of offset/latest while records are produced.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// -s 0.1: tail polls a FUSE file (no inotify there), every second by default.
	tail := exec.CommandContext(ctx, "tail", "-f", "-s", "0.1", filepath.Join(mp, "log/0/offset/latest"))
	stdout, err := tail.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, tail.Start())
	defer func() { tail.Process.Kill(); tail.Wait() }()
	got := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	// latest resolves as tail opens it: a record produced before is not
	// in the file tail follows.
	fusetest.WaitOpen(t, tail.Process.Pid, filepath.Join(mp, "log/0/offset"))
	for i := 0; i < 5; i++ {
		produce(t, cl, "log", 0, "live-"+strconv.Itoa(i))
		select {
		case line := <-got:
			require.Equal(t, "live-"+strconv.Itoa(i), line)
		case <-ctx.Done():
			t.Fatalf("tail -f did not show live-%d", i)
		}
	}
}

// A read before what the copy holds grows the copy backwards: a file
// already open further on (tail -f of latest) goes on following, and the
// earlier read gets every record.
func TestMountCopyGrowsBackwards(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "back"))
	cl := client(t, c)
	var vals []string
	for i := 0; i < 3000; i++ {
		vals = append(vals, "b"+strconv.Itoa(i))
	}
	for i := 0; i < len(vals); i += 100 {
		produce(t, cl, "back", 0, vals[i:i+100]...)
	}
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "back/0")
	require.Equal(t, lines("b", 2000, 3000), readFile(t, filepath.Join(dir, "offset/2000")))
	latest, err := os.Open(filepath.Join(dir, "offset/latest"))
	require.NoError(t, err)
	defer latest.Close()

	require.Equal(t, lines("b", 1234, 3000), readFile(t, filepath.Join(dir, "offset/1234")))
	require.Equal(t, lines("b", 0, 3000), readFile(t, filepath.Join(dir, "offset/0")))
	produce(t, cl, "back", 0, "b3000", "b3001")
	buf := make([]byte, 100)
	require.Eventually(t, func() bool {
		n, _ := latest.ReadAt(buf, 0)
		return string(buf[:n]) == "b3000\nb3001\n"
	}, 5*time.Second, 20*time.Millisecond, "the open file goes on following")
	require.Equal(t, lines("b", 0, 3002), readFile(t, filepath.Join(dir, "offset/0")))
}

// The copy keeps to its byte budget: the partition read least recently
// loses its oldest segments, and reading them again fetches them again.
func TestMountCopyBudget(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(2, "big"))
	cl := client(t, c)
	value := strings.Repeat("v", 1000)
	for part := int32(0); part < 2; part++ {
		for i := 0; i < 40; i++ {
			var vals []string
			for j := 0; j < 50; j++ {
				vals = append(vals, value+strconv.Itoa(i*50+j))
			}
			produce(t, cl, "big", part, vals...)
		}
	}
	want := func() string {
		var b strings.Builder
		for i := 0; i < 2000; i++ {
			b.WriteString(value + strconv.Itoa(i) + "\n")
		}
		return b.String()
	}()
	kc, mp := mounted(t, c, kafka.Options{CopyBytes: 3 << 20, CopySegmentBytes: 256 << 10}, fs.Options{})
	require.Equal(t, want, readFile(t, filepath.Join(mp, "big/0/offset/0")))
	time.Sleep(50 * time.Millisecond) // big/0 read before big/1
	require.Equal(t, want, readFile(t, filepath.Join(mp, "big/1/offset/0")))
	copySize := func() int64 {
		var n int64
		for _, id := range []int{0, 1} {
			p, err := kc.Copy(context.Background(), "big", id)
			require.NoError(t, err)
			n += p.Size()
		}
		return n
	}
	require.Eventually(t, func() bool { return copySize() <= 3<<20 }, 30*time.Second, 50*time.Millisecond)
	p0, _ := kc.Copy(context.Background(), "big", 0)
	require.Positive(t, p0.StartOffset(), "the partition read first lost its oldest segments")
	require.Equal(t, want, readFile(t, filepath.Join(mp, "big/0/offset/0")), "and fetches them again")
}
