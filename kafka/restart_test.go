package kafka_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/fusetest"
	"github.com/logfs/logfs/kafka"
)

// mountProc is a mount in a process of its own (helperMount), so that a
// test can kill it.
type mountProc struct {
	cmd *exec.Cmd
	mp  string
}

func startMountProc(t *testing.T, c *kfake.Cluster, copyDir, mp string) *mountProc {
	t.Helper()
	fusetest.Require(t)
	require.NoError(t, os.MkdirAll(mp, 0o755))
	cmd := exec.Command(os.Args[0], strings.Join(c.ListenAddrs(), ","), copyDir, mp)
	cmd.Env = append(os.Environ(), helperEnv+"=mount")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the mount process did not start: %v", err)
	}
	require.Equal(t, "mounted\n", line)
	m := &mountProc{cmd: cmd, mp: mp}
	t.Cleanup(func() { m.kill(t) })
	return m
}

// stop ends the mount with SIGTERM: a clean unmount and close.
func (m *mountProc) stop(t *testing.T) {
	t.Helper()
	if m.cmd.ProcessState != nil {
		return
	}
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, m.cmd.Wait())
}

// kill ends the mount with SIGKILL and detaches what it leaves mounted.
func (m *mountProc) kill(t *testing.T) {
	t.Helper()
	if m.cmd.ProcessState == nil {
		m.cmd.Process.Kill()
		m.cmd.Wait()
	}
	fusetest.Unmount(m.mp, true)
}

// fetchesFrom counts, per fetch offset, the fetches of topic/0 the
// cluster is asked for.
type fetchLog struct {
	mu      sync.Mutex
	offsets []int64
}

func watchFetches(c *kfake.Cluster, topic string) *fetchLog {
	fl := &fetchLog{}
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, t := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range t.Partitions {
				if t.Topic == topic || t.Topic == "" {
					fl.mu.Lock()
					fl.offsets = append(fl.offsets, p.FetchOffset)
					fl.mu.Unlock()
				}
			}
		}
		return nil, nil, false
	})
	return fl
}

func (fl *fetchLog) min() int64 {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	m := int64(-1)
	for _, o := range fl.offsets {
		if m < 0 || o < m {
			m = o
		}
	}
	return m
}

func (fl *fetchLog) reset() {
	fl.mu.Lock()
	fl.offsets = nil
	fl.mu.Unlock()
}

// A mount started again on the same copy reads what it holds without
// fetching it again, after a clean stop and after a kill -9 (recovery
// checks the copy like any data directory), and shows what was produced
// while it was down.
func TestMountRestartReusesCopy(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "keep"))
	cl := client(t, c)
	vals := values("k", 3000)
	for i := 0; i < len(vals); i += 100 {
		produce(t, cl, "keep", 0, vals[i:i+100]...)
	}
	fl := watchFetches(c, "keep")
	copyDir := t.TempDir()
	want := strings.Join(vals, "\n") + "\n"
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	require.Equal(t, want, readFile(t, filepath.Join(m.mp, "keep/0/offset/0")))

	for round, end := range []func(*mountProc, *testing.T){(*mountProc).stop, (*mountProc).kill} {
		end(m, t)
		more := values("r"+strconv.Itoa(round)+"-", 50)
		produce(t, cl, "keep", 0, more...)
		want += strings.Join(more, "\n") + "\n"
		fl.reset()
		m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
		require.Equal(t, want, readFile(t, filepath.Join(m.mp, "keep/0/offset/0")), "round %d", round)
		require.GreaterOrEqual(t, fl.min(), int64(3000+50*round), "round %d: fetched what the copy held again", round)
	}
	m.stop(t)
}

// A mount killed while a reader is open and records are being produced
// comes back with a copy that reads right: every record once, in order.
func TestMountKilledWhileFollowing(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(1, "live"))
	cl := client(t, c)
	copyDir := t.TempDir()
	m := startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	f, err := os.Open(filepath.Join(m.mp, "live/0/offset/0"))
	require.NoError(t, err)
	var want strings.Builder
	for i := 0; i < 40; i++ {
		vs := values("l"+strconv.Itoa(i)+"-", 25)
		produce(t, cl, "live", 0, vs...)
		want.WriteString(strings.Join(vs, "\n") + "\n")
		if i == 20 {
			time.Sleep(50 * time.Millisecond)
			m.kill(t)
		}
	}
	f.Close()
	m = startMountProc(t, c, copyDir, filepath.Join(t.TempDir(), "mnt"))
	sameText(t, want.String(), readFile(t, filepath.Join(m.mp, "live/0/offset/0")))
	m.stop(t)
}

// openFDs counts the process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// Many opens of every kind of file, appends among them, leave no
// descriptor and no goroutine behind once the partitions are idle.
func TestMountNoLeaksOverManyOpens(t *testing.T) {
	c := fakeCluster(t, kfake.SeedTopics(3, "leak"))
	cl := client(t, c)
	for p := int32(0); p < 3; p++ {
		produce(t, cl, "leak", p, values("x", 200)...)
	}
	_, mp := mounted(t, c, kafka.Options{Properties: kafka.Properties{"fetch.max.wait.ms": "50"}}, fs.Options{})
	round := func(i int) {
		p := strconv.Itoa(i % 3)
		dir := filepath.Join(mp, "leak", p)
		for _, name := range []string{"offset/0", "offset/" + strconv.Itoa(i%200), "offset/latest", "offset/earliest.jsonl", "time/2024-01-01", "info"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err, name)
			if name != "offset/latest" {
				require.NotEmpty(t, b, name)
			}
		}
		_, err := appendTo(filepath.Join(dir, "append"), []byte("more\n"))
		require.NoError(t, err)
		_, err = os.ReadDir(dir + "/offset")
		require.NoError(t, err)
	}
	for i := 0; i < 30; i++ { // warm: every partition copied and followed once
		round(i)
	}
	settle := func() (int, int) {
		time.Sleep(200 * time.Millisecond)
		runtime.GC()
		return runtime.NumGoroutine(), openFDs(t)
	}
	g0, fd0 := settle()
	for i := 0; i < 300; i++ {
		round(i)
	}
	var g1, fd1 int
	require.Eventually(t, func() bool {
		g1, fd1 = settle()
		return g1 <= g0+5 && fd1 <= fd0+3
	}, 10*time.Second, 100*time.Millisecond, "goroutines %d -> %d, descriptors %d -> %d", g0, g1, fd0, fd1)
	t.Logf("after 300 rounds: goroutines %d -> %d, descriptors %d -> %d", g0, g1, fd0, fd1)
}

// procStatus reads a field of /proc/PID/status in kB.
func procStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// A cold cat of a large partition does not grow the mount's memory with
// the partition: what is fetched goes to the copy, not to the heap.
// LOGFS_KAFKA_RSS_MB sets the partition's size (96 MiB by default).
func TestMountMemoryUnderColdCat(t *testing.T) {
	mb := 96
	if v := os.Getenv("LOGFS_KAFKA_RSS_MB"); v != "" {
		var err error
		mb, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	c := fakeCluster(t, kfake.SeedTopics(1, "big"))
	cl := client(t, c, kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond))
	value := []byte(strings.Repeat("m", 1023))
	n := mb << 10
	ctx := context.Background()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "big", Value: value}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	m := startMountProc(t, c, t.TempDir(), filepath.Join(t.TempDir(), "mnt"))
	pid := m.cmd.Process.Pid
	before := procStatus(t, pid, "VmRSS")
	f, err := os.Open(filepath.Join(m.mp, "big/0/offset/0"))
	require.NoError(t, err)
	read, err := io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
	require.NoError(t, err)
	f.Close()
	require.EqualValues(t, n*1024, read)
	peak, anon := procStatus(t, pid, "VmHWM"), procStatus(t, pid, "RssAnon")
	t.Logf("cold cat of %d MiB: the mount's RSS %d MiB before, peak %d MiB, anonymous %d MiB after", mb, before>>10, peak>>10, anon>>10)
	// Measured: a peak of 50 MiB for 16 MiB, 80 MiB for 256 MiB; a mount
	// that kept the partition in memory would pass mb.
	require.Less(t, peak>>10, int64(64+mb/2), "peak memory of a cold cat of %d MiB", mb)
	m.stop(t)
}
