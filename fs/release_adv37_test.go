package fs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// logBuffer is a log the mount writes while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestGiveUpAtStopEndsEveryLineLeft: three handles hold unfinished lines
// when the connection goes without their RELEASEs (an abort, an umount
// right after the closes), so the shutdown appends them itself, one after
// the other, to a cluster that never answers. Once the connection is gone
// nothing is served any more: a give-up then gives up every line left, not
// only the one under way, or each of the others would wait out
// delivery.timeout.ms in turn, a Ctrl-C apiece.
func TestGiveUpAtStopEndsEveryLineLeft(t *testing.T) {
	l, p := newMountedPartition(t, "t")
	c := &gatedCluster{l: l, gate: make(chan struct{})} // never answers
	var logged logBuffer
	f := newLogFS(l, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)), Cluster: c}.withDefaults(l))
	ps := f.partition(p)
	for _, line := range []string{"a", "b", "c"} {
		h := &appendHandle{n: &appendNode{ps: ps}}
		n, errno := h.Write(context.Background(), []byte(line), 0)
		require.Zero(t, errno)
		require.EqualValues(t, 1, n)
	}

	done := make(chan struct{})
	go func() {
		f.shutdown()
		close(done)
	}()
	require.Eventually(t, func() bool { return f.releasing.Load() == 1 }, 30*time.Second, time.Millisecond)
	f.giveUpReleases()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(c.gate) // let the shutdown end, for the log's close
		<-done
		t.Fatalf("the shutdown still waited on the lines left 30 s after the give-up; log:\n%s", logged.String())
	}
	require.Empty(t, values(t, p))
	require.Equal(t, 3, strings.Count(logged.String(), "level=ERROR msg=\"logfs: the unterminated last line of an append file was not appended\""), logged.String())
}
