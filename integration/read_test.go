package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/storage"
)

// line is the value of record i in the read tests: lengths vary so that
// byte positions and offsets do not line up.
func line(i int) string {
	return fmt.Sprintf("record %d %s", i, strings.Repeat("x", i%97))
}

// fill appends n records (values line(0..n-1)) in batches of varying size
// and returns the expected rendering of offset/0.
func fill(t testing.TB, p *storage.Partition, n int) string {
	t.Helper()
	var want strings.Builder
	rng := rand.New(rand.NewSource(int64(n)))
	for i := 0; i < n; {
		var recs []storage.Record
		for k := 1 + rng.Intn(40); k > 0 && i < n; k, i = k-1, i+1 {
			recs = append(recs, storage.Record{Value: []byte(line(i))})
			want.WriteString(line(i) + "\n")
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	return want.String()
}

// newPartition creates topic (one partition) in l and returns it.
func newPartition(t testing.TB, l *storage.Log, topic string, o storage.Overrides) *storage.Partition {
	t.Helper()
	top, err := l.CreateTopic(topic, 1, o)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	return p
}

// TestReadWithTools reads a partition of several segments with cat, head,
// tail, wc, grep and dd, by offset and with .jsonl, and checks sizes and
// listings.
func TestReadWithTools(t *testing.T) {
	for _, directIO := range []bool{false, true} {
		t.Run(fmt.Sprintf("directio=%v", directIO), func(t *testing.T) {
			l, _ := newLog(t, nil)
			p := newPartition(t, l, "orders", storage.Overrides{"segment.bytes": 64 << 10})
			const n = 3000
			want := fill(t, p, n)
			require.Greater(t, len(p.SegmentBases()), 3)
			mnt := mount(t, l, fs.Options{DirectIO: directIO})
			dir := part(mnt, "orders", 0)
			off := func(name string) string { return q(filepath.Join(dir, "offset", name)) }

			require.Equal(t, want, sh(t, "cat %s", off("0")))
			require.Equal(t, want, sh(t, "cat %s", off("earliest")))
			require.Equal(t, "", sh(t, "cat %s", off("latest")))
			st, err := os.Stat(filepath.Join(dir, "offset", "0"))
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), st.Size(), "st_size is exact")
			require.Equal(t, p.ModTime().Unix(), st.ModTime().Unix())

			lines := strings.SplitAfter(want, "\n")
			require.Equal(t, strings.Join(lines[:3], ""), sh(t, "head -n 3 %s", off("0")))
			require.Equal(t, strings.Join(lines[n-10:n], ""), sh(t, "tail -n 10 %s", off("0")))
			require.Equal(t, fmt.Sprintf("%d\n", n), sh(t, "wc -l < %s", off("0")))
			require.Equal(t, "record 1234 "+strings.Repeat("x", 1234%97)+"\n", sh(t, "grep '^record 1234 ' %s", off("0")))
			for _, k := range []int{1, 999, 1000, 2999} {
				require.Equal(t, strings.Join(lines[k:n], ""), sh(t, "cat %s", off(strconv.Itoa(k))), "offset/%d", k)
			}
			require.Equal(t, want[9*512:12*512], sh(t, "dd if=%s bs=512 skip=9 count=3 status=none", off("0")))
			require.Equal(t, want[4096*7:4096*9], sh(t, "dd if=%s bs=4096 skip=7 count=2 status=none", off("0")))

			// .jsonl: one object per record, with its offset.
			js := sh(t, "cat %s", off("2990.jsonl"))
			var got []string
			for i, l := range strings.Split(strings.TrimSuffix(js, "\n"), "\n") {
				var obj struct {
					Offset int64  `json:"offset"`
					Value  string `json:"value"`
				}
				require.NoError(t, json.Unmarshal([]byte(l), &obj))
				require.Equal(t, int64(2990+i), obj.Offset)
				got = append(got, obj.Value)
			}
			require.Len(t, got, 10)
			require.Equal(t, line(2999), got[9])

			// ls shows the segment bases, earliest and latest.
			var names []string
			for _, b := range p.SegmentBases() {
				names = append(names, strconv.FormatInt(int64(b), 10))
			}
			names = append(names, "earliest", "latest")
			require.ElementsMatch(t, names, strings.Fields(sh(t, "ls %s", q(filepath.Join(dir, "offset")))))
			require.Equal(t, "append\nappend.jsonl\ninfo\noffset\ntime\n", sh(t, "ls %s", q(dir)))
			require.Equal(t, "orders\n", sh(t, "ls %s", q(mnt)))
			require.Equal(t, "0\n", sh(t, "ls %s", q(filepath.Join(mnt, "orders"))))

			// Out of range, or not an offset: ENOENT.
			for _, name := range []string{strconv.Itoa(n + 1), "99999999", "-1", "x", "1.json", "earliest.jsonl.jsonl"} {
				_, err := os.Stat(filepath.Join(dir, "offset", name))
				require.ErrorIs(t, err, syscall.ENOENT, "offset/%s", name)
			}
			require.Contains(t, shFails(t, "cat %s", off(strconv.Itoa(n+1))), "No such file")

			// info describes the log.
			var info struct {
				LogStartOffset int64 `json:"log_start_offset"`
				LogEndOffset   int64 `json:"log_end_offset"`
				Size           int64 `json:"size"`
				Segments       []struct {
					BaseOffset int64 `json:"base_offset"`
					Bytes      int64 `json:"bytes"`
				} `json:"segments"`
			}
			require.NoError(t, json.Unmarshal([]byte(sh(t, "cat %s", q(filepath.Join(dir, "info")))), &info))
			require.Equal(t, int64(n), info.LogEndOffset)
			require.Equal(t, p.Size(), info.Size)
			require.Len(t, info.Segments, len(p.SegmentBases()))
		})
	}
}

// TestPread reads a record file at random positions and lengths, as a
// program with pread would, and compares with one sequential read.
func TestPread(t *testing.T) {
	for _, directIO := range []bool{false, true} {
		t.Run(fmt.Sprintf("directio=%v", directIO), func(t *testing.T) {
			l, _ := newLog(t, nil)
			p := newPartition(t, l, "p", storage.Overrides{"segment.bytes": 32 << 10})
			fill(t, p, 5000)
			mnt := mount(t, l, fs.Options{DirectIO: directIO})
			for _, name := range []string{"0", "1717", "1717.jsonl", "0.jsonl"} {
				path := filepath.Join(part(mnt, "p", 0), "offset", name)
				seq, err := os.ReadFile(path)
				require.NoError(t, err)
				f, err := os.Open(path)
				require.NoError(t, err)
				rng := rand.New(rand.NewSource(7))
				buf := make([]byte, 64<<10)
				for range 300 {
					off := rng.Int63n(int64(len(seq)) + 10)
					n, err := f.ReadAt(buf[:1+rng.Intn(len(buf))], off)
					if err != nil {
						require.ErrorIs(t, err, io.EOF)
					}
					end := min(off+int64(n), int64(len(seq)))
					require.Equal(t, seq[min(off, end):end], buf[:n], "%s at %d", name, off)
				}
				require.NoError(t, f.Close())
			}
		})
	}
}

// TestTailFollow runs tail -f on a record file while lines are appended
// through the mount, and expects every line within a generous deadline.
func TestTailFollow(t *testing.T) {
	for _, file := range []string{"offset/latest", "offset/0", "time/2000-01-01T00:00:00Z"} {
		t.Run(strings.ReplaceAll(file, "/", "_"), func(t *testing.T) {
			l, _ := newLog(t, nil)
			p := newPartition(t, l, "events", nil)
			_, err := p.Append([]storage.Record{{Value: []byte("before")}})
			require.NoError(t, err)
			mnt := mount(t, l, fs.Options{})
			dir := part(mnt, "events", 0)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lines := tailLines(t, ctx, "-n", "+1", "-f", filepath.Join(dir, file))
			expect := func(want string) {
				t.Helper()
				select {
				case got := <-lines:
					require.Equal(t, want, got)
				case <-time.After(10 * time.Second):
					t.Fatalf("tail -f did not show %q", want)
				}
			}
			if file != "offset/latest" {
				expect("before")
			}
			for i := range 5 {
				sh(t, "echo line-%d >> %s", i, q(filepath.Join(dir, "append")))
				start := time.Now()
				expect(fmt.Sprintf("line-%d", i))
				t.Logf("line %d shown after %v", i, time.Since(start))
			}
		})
	}
}

// tailLines runs tail with args, the file last, until ctx is done (and
// waits for it when the test ends), and returns the lines it prints once
// tail has the file open: what is appended from then on is tail's to show.
func tailLines(t *testing.T, ctx context.Context, args ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, "tail", args...)
	cmd.Dir = os.TempDir()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	fusetest.WaitOpen(t, cmd.Process.Pid, filepath.Dir(args[len(args)-1]))
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

// TestTime resolves time/T in every accepted form.
func TestTime(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "t", nil)
	base := int64(1_700_000_000_000)
	for i := range 10 {
		_, err := p.Append([]storage.Record{{Timestamp: base + int64(i)*60_000, Value: []byte(fmt.Sprint("m", i))}})
		require.NoError(t, err)
	}
	mnt := mount(t, l, fs.Options{})
	dir := filepath.Join(part(mnt, "t", 0), "time")
	for name, want := range map[string]string{
		"1700000000":                "m0\nm1\nm2\nm3\nm4\nm5\nm6\nm7\nm8\nm9\n",
		"1700000120000":             "m2\nm3\nm4\nm5\nm6\nm7\nm8\nm9\n",
		"1700000120001":             "m3\nm4\nm5\nm6\nm7\nm8\nm9\n",
		"2023-11-14T22:21:20Z":      "m8\nm9\n",
		"2023-11-14T23:21:20+01:00": "m8\nm9\n",
		"1900000000":                "",
		"0":                         "m0\nm1\nm2\nm3\nm4\nm5\nm6\nm7\nm8\nm9\n",
	} {
		require.Equal(t, want, sh(t, "cat %s", q(filepath.Join(dir, name))), name)
	}
	js := sh(t, "cat %s", q(filepath.Join(dir, "1700000540000.jsonl")))
	require.Equal(t, `{"offset":9,"timestamp":1700000540000,"key":null,"value":"m9"}`+"\n", js)
	for _, bad := range []string{"yesterday", "17e9", "2023-13-01T00:00:00Z"} {
		_, err := os.Stat(filepath.Join(dir, bad))
		require.ErrorIs(t, err, syscall.ENOENT, bad)
	}
	require.Equal(t, "", sh(t, "ls %s", q(dir)))

	// A time with no record that recent is an empty file that grows with
	// the records from the first one stamped that late (timefile_test.go).
	future := filepath.Join(dir, "1900000000")
	f, err := os.Open(future)
	require.NoError(t, err)
	defer f.Close()
	_, err = p.Append([]storage.Record{{Value: []byte("now")}, {Timestamp: 1_900_000_000_000, Value: []byte("later")}})
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, "later\n", string(b))
}

// TestConcurrentReaders reads one partition from several processes while
// it grows, each seeing a prefix of the final contents.
func TestConcurrentReaders(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "c", storage.Overrides{"segment.bytes": 16 << 10})
	first := fill(t, p, 500)
	mnt := mount(t, l, fs.Options{})
	file := filepath.Join(part(mnt, "c", 0), "offset", "0")
	var wg sync.WaitGroup
	outs := make([]string, 4)
	errs := make([]error, 4)
	for i := range outs {
		wg.Go(func() {
			for range 5 {
				var err error
				outs[i], _, err = run(context.Background(), "cat "+q(file))
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	full := first + fill(t, p, 2000)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, o := range outs {
		require.True(t, strings.HasPrefix(full, o), "a reader saw something else than a prefix")
		require.GreaterOrEqual(t, len(o), len(first))
		require.True(t, strings.HasSuffix(o, "\n"), "a reader saw part of a record")
	}
}

// Sequential readers of different files at once, each with its requests
// rendered ahead into buffers from one pool, get exactly their own bytes.
// (The order go-fuse gives a read result back and writes it in is pinned
// by fs.TestReadAhead, which does not depend on timing.)
func TestConcurrentReadAhead(t *testing.T) {
	l, _ := newLog(t, nil)
	const readers = 6
	want := make([]string, readers)
	for i := range want {
		p := newPartition(t, l, fmt.Sprintf("r%d", i), nil)
		var b strings.Builder
		for n := 0; b.Len() < 6<<20; n += 64 {
			recs := make([]storage.Record, 64)
			for k := range recs {
				v := fmt.Sprintf("reader %d record %08d %s", i, n+k, strings.Repeat(string(rune('a'+i)), 200))
				recs[k] = storage.Record{Value: []byte(v)}
				b.WriteString(v + "\n")
			}
			_, err := p.Append(recs)
			require.NoError(t, err)
		}
		want[i] = b.String()
	}
	mnt := mount(t, l, fs.Options{})
	var wg sync.WaitGroup
	errs := make([]error, readers)
	for i := range readers {
		file := filepath.Join(part(mnt, fmt.Sprintf("r%d", i), 0), "offset", "0")
		wg.Go(func() {
			// Small requests: many of them, each a chance for another
			// reader's read-ahead to take a buffer still being written.
			for range 3 {
				out, _, err := run(context.Background(), "dd bs=16k status=none if="+q(file))
				if err != nil {
					errs[i] = err
					return
				}
				if out != want[i] {
					errs[i] = fmt.Errorf("reader %d: %d bytes differ from the %d written, first at %d", i, len(out), len(want[i]), firstDiff(out, want[i]))
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// firstDiff returns the first position where a and b differ.
func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// The mount raises its backing device's read-ahead window to
// fs.ReadAheadKB where it may (as root: CI mounts as root), two requests
// of the largest size, so that the kernel has two requests of a reader of
// 1 MiB read(2)s on their way at once and both CPUs render.
func TestMountRaisesReadAhead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a device's read_ahead_kb is root's to set")
	}
	require.GreaterOrEqual(t, fs.ReadAheadKB<<10, 2*fs.DefaultMaxWrite, "a window of two requests")
	l, _ := newLog(t, nil)
	mnt := mount(t, l, fs.Options{})
	var st unix.Stat_t
	require.NoError(t, unix.Stat(mnt, &st))
	kb, err := os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev)))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(fs.ReadAheadKB), strings.TrimSpace(string(kb)))
}
