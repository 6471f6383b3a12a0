package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// The broker writer is this test binary run again with envBrokerDir set:
// a process of its own that writes a partition folder the way a Kafka
// broker does (internal/broker), one command per line of stdin, and
// answers each with "ok <log end offset>".
const envBrokerDir = "LOGFS_TEST_BROKER_DIR"

func init() {
	if dir := os.Getenv(envBrokerDir); dir != "" {
		os.Exit(brokerWriter(dir))
	}
}

// brokerWriter runs the commands: write N, roll, delete, clean I,
// truncate OFFSET, checkpoint, quit.
func brokerWriter(dir string) int {
	p, err := broker.Create(dir, "live", 0, broker.Options{SegmentBytes: 2048, IndexInterval: 256})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	n, prefix := 0, ""
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		arg := 0
		if len(f) > 1 {
			arg, _ = strconv.Atoi(f[1])
		}
		switch f[0] {
		case "write":
			for i := 0; i < arg && err == nil; i++ {
				_, err = p.Write(-1, false, prefix+brokerValue(n))
				n++
			}
		case "roll":
			err = p.Roll()
		case "delete":
			err = p.DeleteOldest(true)
		case "clean": // keeps the batches at even offsets
			err = p.Clean(arg, func(b *record.Batch) bool { return b.BaseOffset%2 == 0 })
		case "truncate":
			err = p.Truncate(record.Offset(arg))
			n, prefix = arg, "after the cut " // other records at the same offsets
		case "checkpoint":
			err = p.Checkpoint(p.End())
		case "quit":
			return 0
		}
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ok", p.End())
	}
	return 0
}

// brokerValue is the value of the record at offset i.
func brokerValue(i int) string { return fmt.Sprintf("live %d %s", i, strings.Repeat("z", i%23)) }

// brokerProc is a running broker writer.
type brokerProc struct {
	t   *testing.T
	in  *bufio.Writer
	out *bufio.Scanner
}

func startBroker(t *testing.T, dir string) *brokerProc {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBrokerDir+"="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	return &brokerProc{t: t, in: bufio.NewWriter(stdin), out: bufio.NewScanner(stdout)}
}

// do sends a command and returns the log end offset after it.
func (b *brokerProc) do(cmd string) record.Offset {
	b.t.Helper()
	fmt.Fprintln(b.in, cmd)
	require.NoError(b.t, b.in.Flush())
	require.True(b.t, b.out.Scan(), "the broker writer ended")
	line := b.out.Text()
	require.True(b.t, strings.HasPrefix(line, "ok "), "%s: %s", cmd, line)
	n, err := strconv.ParseInt(strings.TrimPrefix(line, "ok "), 10, 64)
	require.NoError(b.t, err)
	return record.Offset(n)
}

// expectedValues renders offsets [from, to) as the values view does;
// records from cutAt on were written after the truncation.
func expectedValues(from, to record.Offset, keep func(record.Offset) bool) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		if keep == nil || keep(i) {
			if i >= cutAt {
				b.WriteString("after the cut ")
			}
			b.WriteString(brokerValue(int(i)) + "\n")
		}
	}
	return b.String()
}

// cutAt is where the test's broker truncated its log.
var cutAt = record.Offset(1 << 62)

// syncBuffer is tail's output, read while tail writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until got() is want, and returns how long it took.
func waitFor(t *testing.T, what, want string, got func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		g := got()
		if g == want {
			return time.Since(start)
		}
		if time.Since(start) > 20*time.Second {
			require.Equal(t, want, g, "waited 20 s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFollowLiveBroker mounts, read-only and following, a data directory
// that a broker writer process keeps writing: appends, rolls, retention's
// deletions, a cleaner's swap and a truncation. tail -f of offset/0 shows
// every record as the broker makes it stable (the high watermark), cat
// of any record file shows the partition as it is now, and nothing is
// ever written to the data directory.
func TestFollowLiveBroker(t *testing.T) {
	data := t.TempDir()
	b := startBroker(t, data)
	b.do("write 30")
	end := b.do("checkpoint")
	before := snapshotFiles(t, data)

	l := openLog(t, data, storage.Options{ReadOnly: true, Follow: true})
	mnt := mount(t, l, fs.Options{})
	dir := part(mnt, "live", 0)
	off := func(name string) string { return filepath.Join(dir, "offset", name) }
	require.Equal(t, expectedValues(0, end, nil), sh(t, "cat %s", q(off("0"))))

	var tailOut syncBuffer
	tail := exec.Command("tail", "-n", "+1", "-f", "--sleep-interval=0.1", off("0"))
	tail.Stdout = &tailOut
	require.NoError(t, tail.Start())
	defer func() {
		tail.Process.Kill()
		tail.Wait()
	}()
	waitFor(t, "tail -f to print what is there", expectedValues(0, end, nil), tailOut.String)

	// Appends and rolls: tail -f shows them once the broker checkpoints
	// the high watermark; records past it are not shown yet.
	bases := func() []record.Offset { // the segments offset/ lists
		var out []record.Offset
		for _, f := range strings.Fields(sh(t, "ls %s | sort -n", q(filepath.Join(dir, "offset")))) {
			if n, err := strconv.ParseInt(f, 10, 64); err == nil {
				out = append(out, record.Offset(n))
			}
		}
		return out
	}
	first := func() record.Offset { return bases()[0] }
	var lags []time.Duration
	for round := 0; round < 5; round++ {
		b.do("write 17")
		require.Equal(t, expectedValues(0, end, nil), sh(t, "cat %s", q(off("0"))), "nothing past the high watermark")
		end = b.do("checkpoint")
		lags = append(lags, waitFor(t, "tail -f to follow", expectedValues(0, end, nil), tailOut.String))
	}
	t.Logf("tail -f showed each round of appends %v after the high watermark moved", lags)
	require.Greater(t, len(bases()), 3, "the broker rolled")

	// Retention deletes the oldest segment: earliest moves on, tail -f
	// (past it already) goes on.
	old := first()
	b.do("delete")
	waitFor(t, "retention", "moved", func() string {
		if first() > old {
			return "moved"
		}
		return "not yet"
	})
	start := first()
	require.Equal(t, expectedValues(start, end, nil), sh(t, "cat %s", q(off("earliest"))))

	// The cleaner replaces the oldest segment by one that keeps half its
	// batches: new readers see the cleaned segment; tail -f read the
	// old one already and goes on.
	b.do("clean 0")
	cleanedTo := bases()[1]
	keep := func(o record.Offset) bool { return o >= cleanedTo || o%2 == 0 }
	waitFor(t, "the cleaned segment", expectedValues(start, end, keep), func() string { return sh(t, "cat %s", q(off("earliest"))) })
	b.do("write 5")
	end = b.do("checkpoint")
	waitFor(t, "tail -f after the clean", expectedValues(0, end, nil), tailOut.String)

	// A truncation of the last records (a leader change): new readers
	// read what the broker writes after the cut; the records past it never
	// show (they were above the high watermark).
	b.do("write 4")
	cut := b.do("truncate " + strconv.Itoa(int(end)))
	require.Equal(t, end, cut)
	cutAt = cut
	defer func() { cutAt = 1 << 62 }()
	b.do("write 2")
	end = b.do("checkpoint")
	// A reader that opened before the follower saw the truncation, and
	// reaches the cut, gets EIO (ErrDeleted): the shell's cat is tried
	// again then.
	waitFor(t, "the records after the truncation", expectedValues(start, end, keep), func() string {
		out, _ := exec.Command("cat", off("earliest")).Output()
		return string(out)
	})
	waitFor(t, "tail -f after the truncation", expectedValues(0, end, nil), tailOut.String)

	require.Equal(t, before, snapshotFiles(t, data), "nothing written by logfs")
}

// snapshotFiles lists the files of the data directory that logfs could
// write (none of the broker's, which change): a .lock, view indexes, temp
// files.
func snapshotFiles(t *testing.T, data string) string {
	var names []string
	err := filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := d.Name()
		if n == ".lock" || strings.HasSuffix(n, ".viewindex") || strings.HasSuffix(n, ".tmp") {
			names = append(names, p)
		}
		return nil
	})
	require.NoError(t, err)
	return strings.Join(names, "\n")
}

// TestFollowLiveBrokerUncommitted: with read_uncommitted a followed
// mount shows the broker's appends without waiting for the high
// watermark; tail -f prints each within about a second.
func TestFollowLiveBrokerUncommitted(t *testing.T) {
	data := t.TempDir()
	b := startBroker(t, data)
	end := b.do("write 3")
	l := openLog(t, data, storage.Options{ReadOnly: true, Follow: true, Isolation: storage.ReadUncommitted})
	mnt := mount(t, l, fs.Options{})
	file := filepath.Join(part(mnt, "live", 0), "offset", "0")
	var tailOut syncBuffer
	tail := exec.Command("tail", "-n", "+1", "-f", "--sleep-interval=0.1", file)
	tail.Stdout = &tailOut
	require.NoError(t, tail.Start())
	defer func() {
		tail.Process.Kill()
		tail.Wait()
	}()
	waitFor(t, "tail -f", expectedValues(0, end, nil), tailOut.String)
	var lags []time.Duration
	for i := 0; i < 10; i++ {
		end = b.do("write 1")
		lags = append(lags, waitFor(t, "tail -f to follow", expectedValues(0, end, nil), tailOut.String))
	}
	t.Logf("tail -f showed each append %v after the broker wrote it", lags)
}
