package kafka_test

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// Readers at random offsets of partitions that do not all fit the copy's
// budget, all at once: every open succeeds and shows exactly the records
// from its offset, while eviction makes room under them.
func TestMountEvictionUnderConcurrentReaders(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(2, "ev"))
	cl := client(t, c)
	value := strings.Repeat("e", 500)
	const n = 3000 // 1.5 MB a partition
	for p := int32(0); p < 2; p++ {
		for i := 0; i < n; i += 100 {
			produce(t, cl, "ev", p, values(value, n)[i:i+100]...)
		}
	}
	want := lines(value, 0, n)
	lineStart := make([]int, n+1)
	for i, pos := 0, 0; i <= n; i++ {
		lineStart[i] = pos
		if i < n {
			pos += len(value) + len(strconv.Itoa(i)) + 1
		}
	}
	_, mp := mounted(t, c, kafka.Options{CopyBytes: 2 << 20, CopySegmentBytes: 64 << 10}, fs.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for time.Now().Before(deadline) {
				p, off := rng.Intn(2), rng.Intn(n)
				path := filepath.Join(mp, "ev", strconv.Itoa(p), "offset", strconv.Itoa(off))
				f, err := os.Open(path)
				if err != nil {
					errs <- fmt.Errorf("open %s: %w", path, err)
					return
				}
				buf := make([]byte, 64<<10)
				k, err := io.ReadFull(f, buf)
				f.Close()
				if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
					errs <- fmt.Errorf("read %s: %w", path, err)
					return
				}
				if exp := want[lineStart[off]:min(lineStart[off]+k, len(want))]; string(buf[:k]) != exp {
					errs <- fmt.Errorf("%s: wrong bytes", path)
					return
				}
			}
		}(int64(r))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// While the copy grows, fstat of an open record file only ever grows,
// always ends at a record's end, and pread anywhere below it gives the
// bytes a sequential read gives.
func TestMountSizeAndPreadWhileGrowing(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "grow"))
	cl := client(t, c)
	produce(t, cl, "grow", 0, "g0")
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"fetch.max.wait.ms": "20"}}, fs.Options{})
	f, err := os.Open(filepath.Join(mp, "grow/0/offset/0"))
	require.NoError(t, err)
	defer f.Close()
	const total = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i < total; i += 30 {
			produce(t, cl, "grow", 0, values("g", total)[i:min(i+30, total)]...)
		}
	}()
	want := strings.Join(values("g", total), "\n") + "\n"
	rng := rand.New(rand.NewSource(1))
	var last int64
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		st, err := f.Stat()
		require.NoError(t, err)
		size := st.Size()
		require.GreaterOrEqual(t, size, last, "st_size shrank")
		require.LessOrEqual(t, size, int64(len(want)))
		last = size
		if size > 0 {
			require.Equal(t, byte('\n'), want[size-1], "st_size %d is not at a record's end", size)
			off := rng.Int63n(size)
			n := min(size-off, 1+rng.Int63n(4096))
			b := make([]byte, n)
			k, err := f.ReadAt(b, off)
			require.NoError(t, err, "pread %d at %d below st_size %d", n, off, size)
			require.Equal(t, want[off:off+int64(k)], string(b[:k]))
			require.EqualValues(t, n, k, "pread below st_size came short")
		}
	}
	require.Eventually(t, func() bool {
		st, err := f.Stat()
		return err == nil && st.Size() == int64(len(want))
	}, 10*time.Second, 10*time.Millisecond)
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, want, string(b))
}

// Read your writes from another process: right after `echo >> append`
// returns, a cat of the offset it went to (looked up before it existed,
// so a cached negative answer would show) shows it.
func TestMountReadYourWritesFromAnotherProcess(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "ryw"))
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "ryw/0")
	for i := 0; i < 30; i++ {
		next := filepath.Join(dir, "offset", strconv.Itoa(i+1))
		_, err := os.Stat(next)
		require.ErrorIs(t, err, os.ErrNotExist)
		line := "w" + strconv.Itoa(i)
		require.NoError(t, exec.Command("sh", "-c", `echo "$1" >> "$2"`, "sh", line, filepath.Join(dir, "append")).Run())
		out, err := exec.Command("cat", filepath.Join(dir, "offset", strconv.Itoa(i))).Output()
		require.NoError(t, err, "round %d", i)
		require.Equal(t, line+"\n", string(out), "round %d", i)
		out, err = exec.Command("tail", "-n", "1", filepath.Join(dir, "offset/0")).Output()
		require.NoError(t, err)
		require.Equal(t, line+"\n", string(out), "round %d", i)
		require.NoError(t, exec.Command("test", "-e", next).Run(), "round %d: offset/%d, the end now, is not there", i, i+1)
	}
}

// tail -f of latest while the partition's leader moves back and forth and
// records are produced: every record shows once, in order.
func TestMountTailWhileLeaderMoves(t *testing.T) {
	c := fakeCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "hop"))
	cl := client(t, c)
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"fetch.max.wait.ms": "50", "metadata.max.age.ms": "200"}}, fs.Options{})
	f, err := os.Open(filepath.Join(mp, "hop/0/offset/latest"))
	require.NoError(t, err)
	defer f.Close()
	var want strings.Builder
	for i := 0; i < 12; i++ {
		require.NoError(t, c.MoveTopicPartition("hop", 0, int32(i%3)))
		vs := values("h"+strconv.Itoa(i)+"-", 20)
		produce(t, cl, "hop", 0, vs...)
		want.WriteString(strings.Join(vs, "\n") + "\n")
		time.Sleep(30 * time.Millisecond)
	}
	var got []byte
	require.Eventually(t, func() bool {
		b := make([]byte, 64<<10)
		n, _ := f.ReadAt(b, 0)
		got = b[:n]
		return n >= want.Len()
	}, 15*time.Second, 20*time.Millisecond, "tail -f saw %d of %d bytes", len(got), want.Len())
	sameText(t, want.String(), string(got))
}
