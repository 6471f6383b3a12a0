package fs

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
)

// TestGrowthDuringDropIsRead replays, in order, a race that served an end
// of file after an append had returned: a drop found nothing past the end
// it dropped from, an append landed, a reader's GETATTR was sent, and the
// drop's notification made the kernel throw that GETATTR's reply away
// (FUSE attribute versions), so the reader kept the old size. A drop must
// leave the kernel a size that holds what was appended before it
// notified.
func TestGrowthDuringDropIsRead(t *testing.T) {
	fusetest.Require(t)
	l, p := newMountedPartition(t, "d")
	add := func(v string) {
		_, err := p.AppendValues([][]byte{[]byte(v)})
		require.NoError(t, err)
	}

	type result struct {
		got string
		err error
	}
	var (
		armed atomic.Bool
		f     *os.File
		read  = make(chan result, 1)
	)
	dropHook = func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		add("b") // returns before the reader reads
		go func() {
			got, err := io.ReadAll(f)
			read <- result{string(got), err}
		}()
		// Long enough for the reader's GETATTR to be sent; its Getattr
		// waits for this drop.
		time.Sleep(200 * time.Millisecond)
	}
	defer func() { dropHook = nil }()

	mp := t.TempDir()
	// The drop that finds nothing to store is the one the notifier makes
	// once appends settled.
	srv, err := Mount(mp, l, Options{NotifyInterval: 500 * time.Millisecond})
	if err != nil {
		fusetest.Unusable(t, err.Error())
	}
	defer func() { require.NoError(t, srv.Unmount()) }()
	f, err = os.Open(filepath.Join(mp, "d", "0", "offset", "0"))
	require.NoError(t, err)
	defer f.Close()

	a := strings.Repeat("a", 1000)
	add(a)
	got, err := io.ReadAll(f) // an end noted inside page 0
	require.NoError(t, err)
	require.Equal(t, a+"\n", string(got))
	armed.Store(true)

	select {
	case r := <-read:
		require.NoError(t, r.err)
		require.Equal(t, "b\n", r.got, "the append returned before the read began")
	case <-time.After(20 * time.Second):
		t.Fatal("no drop came to replay the race")
	}
}
