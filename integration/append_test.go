package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// TestShellAppend appends with the shell's redirections and reads back
// through the mount.
func TestShellAppend(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "logs", nil)
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "logs", 0)
	app, off0 := q(filepath.Join(dir, "append")), q(filepath.Join(dir, "offset", "0"))

	sh(t, "echo hello >> %s", app)
	require.Equal(t, "hello\n", sh(t, "cat %s", off0), "visible as soon as echo returned")
	sh(t, "echo world > %s", app) // open, SETATTR size=0, write
	sh(t, "printf 'a\\nb\\n' >> %s; printf '\\n' >> %s", app, app)
	require.Equal(t, "hello\nworld\na\nb\n\n", sh(t, "cat %s", off0))
	require.Equal(t, record.Offset(5), p.EndOffset())

	// A line split over writes of one open file is one record; the last,
	// unterminated line is appended when the file is released.
	sh(t, "{ printf 'par'; sleep 0.1; printf 'tial\\nlast'; } >> %s", app)
	eventually(t, "the unterminated last line", func() bool { return p.EndOffset() == 7 })
	require.Equal(t, "partial\nlast\n", sh(t, "cat %s", q(filepath.Join(dir, "offset", "5"))))

	// External programs that each close their copy of the descriptor
	// (a FLUSH each) do not end the line.
	sh(t, "{ /usr/bin/printf 'x'; /usr/bin/printf 'y\\n'; } >> %s", app)
	require.Equal(t, "xy\n", sh(t, "cat %s", q(filepath.Join(dir, "offset", "7"))))

	// The append files read as empty and show size 0.
	require.Equal(t, "", sh(t, "cat %s", app))
	st, err := os.Stat(filepath.Join(dir, "append"))
	require.NoError(t, err)
	require.Equal(t, int64(0), st.Size())
	require.Equal(t, os.FileMode(0o200), st.Mode().Perm(), "writable by the owner only")
}

// TestCatBigFileAppend appends many MiB of lines of every length with cat
// and checks every record.
func TestCatBigFileAppend(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "big", storage.Overrides{"segment.bytes": 8 << 20})
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "big", 0)

	src := filepath.Join(t.TempDir(), "lines.txt")
	f, err := os.Create(src)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewSource(1))
	var lines []string
	size := 0
	for size < 24<<20 {
		n := rng.Intn(3000)
		if rng.Intn(100) == 0 {
			n = 100_000 + rng.Intn(400_000) // a few long lines, across many writes
		}
		s := fmt.Sprintf("%d:", len(lines)) + strings.Repeat(string(rune('a'+len(lines)%26)), n)
		lines = append(lines, s)
		w.WriteString(s + "\n")
		size += len(s) + 1
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())

	sh(t, "cat %s >> %s", q(src), q(filepath.Join(dir, "append")))
	require.Equal(t, record.Offset(len(lines)), p.EndOffset())
	require.Equal(t, fmt.Sprintf("%d\n", len(lines)), sh(t, "wc -l < %s", q(filepath.Join(dir, "offset", "0"))))
	require.Equal(t, "", sh(t, "cmp %s %s", q(src), q(filepath.Join(dir, "offset", "0"))))
	require.Greater(t, len(p.SegmentBases()), 2)
}

// TestConcurrentAppenders runs writers that append to one partition at
// once, through their own opens, and finds every line once and whole.
func TestConcurrentAppenders(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "c", nil)
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "c", 0)
	const writers, perWriter = 6, 2000
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			// Lines of different lengths, written by one process with
			// writes that cut lines anywhere (dd's 1000-byte blocks).
			script := fmt.Sprintf(`for i in $(seq %d); do printf 'w%d-%%d-%s\n' $i; done | dd bs=1000 iflag=fullblock status=none >> %s`,
				perWriter, w, strings.Repeat("z", 10*w), q(filepath.Join(dir, "append")))
			_, errOut, err := run(t.Context(), script)
			if err != nil {
				errs[w] = fmt.Errorf("%v: %s", err, errOut)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	eventually(t, "all lines", func() bool { return p.EndOffset() == writers*perWriter })
	got := strings.Split(strings.TrimSuffix(sh(t, "cat %s", q(filepath.Join(dir, "offset", "0"))), "\n"), "\n")
	require.Len(t, got, writers*perWriter)
	var want []string
	for w := range writers {
		for i := 1; i <= perWriter; i++ {
			want = append(want, fmt.Sprintf("w%d-%d-%s", w, i, strings.Repeat("z", 10*w)))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	require.Equal(t, want, got)
}

// TestAppendJSONL writes keys, headers and timestamps through append.jsonl
// and reads them back through offset/N.jsonl and time/T.
func TestAppendJSONL(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "j", nil)
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "j", 0)
	in := `{"key":"k1","value":"v1","timestamp":1700000000000,"headers":[{"key":"h","value":"x"}]}
{"key":null,"value":{"base64":"/w=="},"timestamp":1700000060000,"headers":{"a":"1","b":null}}

{"value":"no key or time"}
`
	sh(t, "cat > %s <<'EOF'\n%sEOF", q(filepath.Join(dir, "append.jsonl")), in)
	require.Equal(t, record.Offset(3), p.EndOffset())

	out := strings.Split(strings.TrimSuffix(sh(t, "cat %s", q(filepath.Join(dir, "offset", "0.jsonl"))), "\n"), "\n")
	require.Len(t, out, 3)
	require.Equal(t, `{"offset":0,"timestamp":1700000000000,"key":"k1","headers":[{"key":"h","value":"x"}],"value":"v1"}`, out[0])
	require.Equal(t, `{"offset":1,"timestamp":1700000060000,"key":null,"headers":[{"key":"a","value":"1"},{"key":"b","value":null}],"value":{"base64":"/w=="}}`, out[1])
	var third struct {
		Offset    int64   `json:"offset"`
		Timestamp int64   `json:"timestamp"`
		Key       *string `json:"key"`
		Value     string  `json:"value"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[2]), &third))
	require.Nil(t, third.Key)
	require.Equal(t, "no key or time", third.Value)
	require.Greater(t, third.Timestamp, int64(1700000060000), "the wall clock")

	require.Equal(t, out[1]+"\n"+out[2]+"\n", sh(t, "cat %s", q(filepath.Join(dir, "time", "1700000030.jsonl"))))
	require.Equal(t, "v1\n", sh(t, "head -n 1 %s", q(filepath.Join(dir, "time", "2023-11-14T22:13:20Z"))))

	// What offset/N.jsonl shows can be appended back as it is. (Not with
	// cat offset/0.jsonl >> append.jsonl: like cat f >> f, that never
	// ends, the file growing as fast as cat reads it.)
	sh(t, "head -n 3 %s >> %s", q(filepath.Join(dir, "offset", "0.jsonl")), q(filepath.Join(dir, "append.jsonl")))
	require.Equal(t, record.Offset(6), p.EndOffset())
	again := sh(t, "cat %s", q(filepath.Join(dir, "offset", "3.jsonl")))
	require.Equal(t, strings.Replace(out[0], `"offset":0`, `"offset":3`, 1), strings.Split(again, "\n")[0])
}

// TestMkdir creates topics and partitions with mkdir.
func TestMkdir(t *testing.T) {
	l, _ := newLog(t, nil)
	mnt := mount(t, l, fs.Options{})
	sh(t, "mkdir %s", q(filepath.Join(mnt, "orders")))
	require.Equal(t, []string{"orders"}, l.Topics())
	require.Equal(t, "0\n", sh(t, "ls %s", q(filepath.Join(mnt, "orders"))))
	sh(t, "echo first >> %s", q(filepath.Join(mnt, "orders", "0", "append")))
	require.Equal(t, "first\n", sh(t, "cat %s", q(filepath.Join(mnt, "orders", "0", "offset", "0"))))

	sh(t, "mkdir %s", q(filepath.Join(mnt, "orders", "1")))
	require.Equal(t, "0\n1\n", sh(t, "ls %s", q(filepath.Join(mnt, "orders"))))
	require.True(t, strings.Contains(sh(t, "ls %s", q(filepath.Join(mnt, "orders", "1"))), "append"))

	for _, bad := range []string{"orders/3", "orders/01", "orders/x", "orders/-1", "bad name", "a:b", strings.Repeat("t", 250)} {
		require.ErrorIs(t, os.Mkdir(filepath.Join(mnt, bad), 0o755), syscall.EINVAL, bad)
	}
	require.ErrorIs(t, os.Mkdir(filepath.Join(mnt, "orders"), 0o755), syscall.EEXIST)
	require.ErrorIs(t, os.Mkdir(filepath.Join(mnt, "orders", "0"), 0o755), syscall.EEXIST)
	require.Equal(t, []string{"orders"}, l.Topics())

	// The tree refuses other changes.
	require.ErrorIs(t, os.Remove(filepath.Join(mnt, "orders", "0", "append")), syscall.EPERM)
	require.ErrorIs(t, os.Remove(filepath.Join(mnt, "orders", "1")), syscall.EPERM)
	require.ErrorIs(t, os.WriteFile(filepath.Join(mnt, "orders", "0", "new"), nil, 0o644), syscall.EPERM)
	require.ErrorIs(t, os.Rename(filepath.Join(mnt, "orders"), filepath.Join(mnt, "x")), syscall.EPERM)
	_, err := os.OpenFile(filepath.Join(mnt, "orders", "0", "offset", "0"), os.O_WRONLY, 0)
	require.ErrorIs(t, err, syscall.EACCES)
	require.Equal(t, "0\nearliest\nlatest\n", sh(t, "ls %s", q(filepath.Join(mnt, "orders", "0", "offset"))))
}

// writeBatches writes data to the partition's append file in one
// write(2) and returns the record count of each batch it became.
func writeBatches(t *testing.T, mnt string, p *storage.Partition, data []byte) []int32 {
	t.Helper()
	start, end := p.Size(), p.EndOffset()
	f, err := os.OpenFile(filepath.Join(part(mnt, p.Topic().Name(), 0), "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	n, err := f.Write(data)
	require.NoError(t, err)
	require.Equal(t, len(data), n)
	require.NoError(t, f.Close())
	require.Equal(t, end+record.Offset(bytes.Count(data, []byte("\n"))), p.EndOffset())
	logFile := filepath.Join(p.Dir(), layout.SegmentFileName(0, layout.LogSuffix))
	lf, err := os.Open(logFile)
	require.NoError(t, err)
	defer lf.Close()
	sc := record.NewScanner(lf, record.Position(start), record.Position(p.Size()), record.ScanOptions{HeadersOnly: true})
	var batches []int32
	for sc.Next() {
		require.LessOrEqual(t, sc.Batch().Size(), p.Topic().Config().MaxMessageBytes, "a batch fits max.message.bytes")
		batches = append(batches, sc.Batch().RecordCount)
	}
	require.NoError(t, sc.Err())
	return batches
}

// TestOneWriteOneBatch: the lines of one write(2) that the kernel sends
// whole land in one batch when they fit max.message.bytes, and otherwise
// in as few as fit it, appended together.
func TestOneWriteOneBatch(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "b", nil)
	mnt := mount(t, l, fs.Options{})
	buf := make([]byte, 2<<20) // page-aligned: a large Go allocation is

	// 1,000,000 bytes at a page offset of 4095: one request whatever the
	// alignment (up to 1 MiB - 4 KiB + 1), and one batch.
	data := append(buf[4095:4095], strings.Repeat(strings.Repeat("a", 999)+"\n", 1000)...)
	require.Equal(t, []int32{1000}, writeBatches(t, mnt, p, data))

	// 1 MiB from a page-aligned buffer: one request, but 1024 records of
	// 1023 bytes are more than max.message.bytes in one batch: two.
	data = append(buf[:0], strings.Repeat(strings.Repeat("b", 1023)+"\n", 1024)...)
	got := writeBatches(t, mnt, p, data)
	require.Len(t, got, 2)
	require.Equal(t, int32(1024), got[0]+got[1])
}
