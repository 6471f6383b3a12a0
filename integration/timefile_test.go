package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// TestTimeFileOpenedEarly: a time/T file opened before any record reached
// T shows, once one has, exactly the records from the first one stamped T
// or later: records stamped before T that came first never show. With
// the wall clock (append, then past T, append) and with the timestamps of
// append.jsonl, in both renderings, for a handle held open, a new open,
// stat sizes, and tail -f.
func TestTimeFileOpenedEarly(t *testing.T) {
	l, _ := newLog(t, nil)
	mnt := mount(t, l, fs.Options{})

	// The wall clock: T a moment from now, which must outlast the opens
	// and the append of "before" below. Where it did not (a loaded
	// machine), "before" is stamped T or later, and the round is tried
	// again on a new topic with a longer moment.
	var (
		dir, name      string
		T              time.Time
		held, heldJSON *os.File
	)
	for round, moment := 0, 500*time.Millisecond; ; round, moment = round+1, 4*moment {
		require.Less(t, round, 4, "appending a record took more than %v", moment/4)
		topic := fmt.Sprintf("t%d", round)
		p := newPartition(t, l, topic, nil)
		_, err := p.Append([]storage.Record{{Value: []byte("old")}})
		require.NoError(t, err)
		dir = part(mnt, topic, 0)
		T = time.Now().Add(moment)
		name = filepath.Join(dir, "time", fmt.Sprint(T.UnixMilli()))
		held, err = os.Open(name)
		require.NoError(t, err)
		defer held.Close()
		heldJSON, err = os.Open(name + ".jsonl")
		require.NoError(t, err)
		defer heldJSON.Close()
		sh(t, "echo before >> %s", q(filepath.Join(dir, "append")))
		r, err := p.NewReader(1)
		require.NoError(t, err)
		rec, err := r.Next()
		r.Close()
		require.NoError(t, err)
		if rec.Timestamp < T.UnixMilli() {
			break
		}
		t.Logf("round %d: %q stamped %d, at or past T %d: the moment of %v was too short", round, rec.Value, rec.Timestamp, T.UnixMilli(), moment)
	}
	st, err := os.Stat(name)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "nothing stamped T or later yet")
	b, err := io.ReadAll(held)
	require.NoError(t, err)
	require.Empty(t, b)
	time.Sleep(time.Until(T) + 10*time.Millisecond)
	sh(t, "echo after >> %s; echo more >> %s", q(filepath.Join(dir, "append")), q(filepath.Join(dir, "append")))
	b, err = io.ReadAll(held)
	require.NoError(t, err)
	require.Equal(t, "after\nmore\n", string(b), "the held file, read on from where it was")
	b, err = io.ReadAll(heldJSON)
	require.NoError(t, err)
	require.Regexp(t, `^\{"offset":2,.*"value":"after"\}\n\{"offset":3,.*"value":"more"\}\n$`, string(b))
	require.Equal(t, "after\nmore\n", sh(t, "cat %s", q(name)), "a new open")
	st, err = os.Stat(name)
	require.NoError(t, err)
	require.Equal(t, int64(len("after\nmore\n")), st.Size())

	// append.jsonl's timestamps: one before T, the first at T, then one
	// before T again, which shows: the file is every record from the first
	// one stamped T or later on, as Kafka's lookup by time gives.
	const U = 2_000_000_000_000
	later := filepath.Join(dir, "time", fmt.Sprint(U))
	held2, err := os.Open(later)
	require.NoError(t, err)
	defer held2.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tail := exec.CommandContext(ctx, "tail", "-n", "+1", "-f", later)
	out, err := tail.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, tail.Start())
	defer tail.Wait()
	defer cancel()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	sh(t, `printf '%%s\n' '{"timestamp":%d,"value":"early"}' '{"timestamp":%d,"value":"at-U"}' '{"timestamp":%d,"value":"late-but-after"}' >> %s`,
		U-1, U, U-7, q(filepath.Join(dir, "append.jsonl")))
	b, err = io.ReadAll(held2)
	require.NoError(t, err)
	require.Equal(t, "at-U\nlate-but-after\n", string(b))
	for _, want := range []string{"at-U", "late-but-after"} {
		select {
		case got := <-lines:
			require.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("tail -f did not show %q", want)
		}
	}
	select {
	case got := <-lines:
		t.Fatalf("tail -f showed %q too", got)
	case <-time.After(1500 * time.Millisecond):
	}
	require.Equal(t, "at-U\nlate-but-after\n", sh(t, "cat %s", q(later)))
}
