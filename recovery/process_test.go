package recovery_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// envWriter makes the test binary a writer process (see TestMain): it
// appends to the data directory the variable names until it is killed.
const envWriter = "LOGFS_RECOVERY_TEST_WRITER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envWriter); dir != "" {
		os.Exit(runWriter(dir))
	}
	os.Exit(m.Run())
}

// killValue is the value of the record at offset off in the kill test:
// checkable by any process without a shared record of what was written.
func killValue(off record.Offset) string {
	return strconv.FormatInt(int64(off), 10) + ":" + strings.Repeat(string(rune('a'+off%26)), int(off*131%300))
}

// runWriter opens (recovering) the data directory, prints "start N" with
// the log end offset it found, then appends batches of 1 to 5 records and
// after every few prints "synced N" once a Sync made every offset below N
// durable. It runs retention at start and every 100 appends. It never returns on its own.
func runWriter(dir string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "writer:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil)) // testing's flags are not parsed here
	l, err := storage.Open(dir, storage.Options{Logger: logger, RetentionCheckInterval: -1})
	if err != nil {
		return fail(err)
	}
	top, err := l.Topic("k")
	if errors.Is(err, storage.ErrNoTopic) {
		o := storage.Overrides{}
		for _, kv := range []string{"segment.bytes=65536", "index.interval.bytes=1024", "retention.bytes=1048576", "file.delete.delay.ms=0"} {
			if err := o.SetPair(kv); err != nil {
				return fail(err)
			}
		}
		top, err = l.CreateTopic("k", 1, o)
	}
	if err != nil {
		return fail(err)
	}
	p, err := top.Partition(0)
	if err != nil {
		return fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "start %d %d\n", p.StartOffset(), p.EndOffset())
	out.Flush()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	for i := 0; ; i++ {
		n := 1 + rng.IntN(5)
		recs := make([]storage.Record, n)
		off := p.EndOffset()
		for j := range recs {
			recs[j] = storage.Record{Value: []byte(killValue(off + record.Offset(j)))}
		}
		if _, err := p.Append(recs); err != nil {
			return fail(err)
		}
		if i%4 == 3 {
			end := p.EndOffset()
			if err := p.Sync(); err != nil {
				return fail(err)
			}
			fmt.Fprintf(out, "synced %d\n", end)
			out.Flush()
		}
		if i%100 == 0 {
			if _, err := l.EnforceRetention(); err != nil {
				return fail(err)
			}
		}
	}
}

// TestKillWriter runs a writer process and kills it with SIGKILL at a
// random moment, many times in a row: each restart recovers, keeps every
// record a Sync acknowledged (above the log start retention reached), shows
// no hole, and continues at the log end.
func TestKillWriter(t *testing.T) {
	rounds, budget := 30, 60*time.Second
	if testing.Short() {
		rounds = 8
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(7, 11))
	var synced, killedAt record.Offset // acknowledged so far; the writer's start after a kill
	deadline := time.Now().Add(budget)
	round := 0
	for ; round < rounds && time.Now().Before(deadline); round++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), envWriter+"="+dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		pid := cmd.Process.Pid
		killed := false
		kill := func() {
			if !killed {
				killed = true
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		t.Cleanup(func() { kill(); cmd.Wait() })

		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		// The writer recovers first: it must have kept every acknowledged
		// record and continue at the log end.
		first, ok := <-lines
		require.True(t, ok, "round %d: the writer died before starting: %s", round, stderr.String())
		var start, end record.Offset
		_, err = fmt.Sscanf(first, "start %d %d", &start, &end)
		require.NoError(t, err, "round %d: %q", round, first)
		require.GreaterOrEqual(t, end, synced, "round %d: the restart lost acknowledged records", round)
		require.GreaterOrEqual(t, end, killedAt, "round %d: offsets went backwards", round)

		// Let it write for a random while once it has synced, then kill it.
		delay := time.Duration(5+rng.IntN(150)) * time.Millisecond
		timer := time.After(delay)
		sawSync := false
	read:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("round %d: the writer exited: %s", round, stderr.String())
				}
				var n record.Offset
				if _, err := fmt.Sscanf(line, "synced %d", &n); err == nil {
					synced = max(synced, n)
					sawSync = true
				}
			case <-timer:
				if sawSync {
					break read
				}
				timer = time.After(time.Millisecond)
			}
		}
		kill()
		for range lines { // what it printed before it died counts too
		}
		waitErr := cmd.Wait()
		require.Error(t, waitErr, "round %d: killed", round)

		// Look at what the kill left without changing it.
		ro, err := storage.Open(dir, storage.Options{ReadOnly: true, Logger: testLogger()})
		require.NoError(t, err, "round %d", round)
		p, err := ro.Partition("k", 0)
		require.NoError(t, err)
		require.GreaterOrEqual(t, p.EndOffset(), synced, "round %d: acknowledged records are there", round)
		checkKillValues(t, p, round)
		killedAt = p.EndOffset()
		require.NoError(t, ro.Close())
	}
	t.Logf("%d kill rounds, %d records acknowledged", round, synced)
	require.GreaterOrEqual(t, round, min(rounds, 8), "enough rounds ran within the time budget")

	// A last recovery, in process: everything checks, and it closes cleanly.
	l, err := storage.Open(dir, storage.Options{Logger: testLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err := l.Partition("k", 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, p.EndOffset(), synced)
	checkKillValues(t, p, round)
	t.Logf("the log holds [%d, %d) in %d segments", p.StartOffset(), p.EndOffset(), len(p.SegmentBases()))
	require.NoError(t, l.Check())
	require.NoError(t, l.Close())
}

// checkKillValues reads p from its start: exactly [start, end), each record
// with its value.
func checkKillValues(t *testing.T, p *storage.Partition, round int) {
	t.Helper()
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	next := p.StartOffset()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "round %d offset %d", round, next)
		require.Equal(t, next, rec.Offset, "round %d: a hole", round)
		require.Equal(t, killValue(rec.Offset), string(rec.Value), "round %d offset %d", round, rec.Offset)
		next++
	}
	require.Equal(t, p.EndOffset(), next, "round %d", round)
}
