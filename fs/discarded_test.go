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
// notified. The append lands at each step of the drop.
func TestGrowthDuringDropIsRead(t *testing.T) {
	for _, step := range []string{"rendered", "storing"} {
		t.Run(step, func(t *testing.T) { growthDuringDrop(t, step) })
	}
}

func growthDuringDrop(t *testing.T, step string) {
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
	dropHook = func(at string) {
		if at != step || !armed.CompareAndSwap(true, false) {
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

	// An append wakes the notifier, whose drop waits for the renders under
	// way: when it runs late (a busy machine), it collects the note of the
	// read below before the hook is armed, and no drop comes after. So the
	// read waits a little for that drop first, longer in each round, and
	// a round whose note went early is tried again.
	for round := 0; round < 6; round++ {
		a := strings.Repeat(string(rune('a'+round)), 1000)
		add(a)
		time.Sleep(20 * time.Millisecond << round)
		got, err := io.ReadAll(f) // an end noted inside a page
		require.NoError(t, err)
		require.Equal(t, a+"\n", string(got))
		armed.Store(true)

		select {
		case r := <-read:
			checkGrowth(t, r.got, r.err)
			return
		case <-time.After(3 * time.Second): // the notifier's drop comes 500 ms after the append
		}
		if armed.CompareAndSwap(true, false) {
			t.Logf("round %d: the read's note was dropped before the hook was armed", round)
			continue
		}
		select { // the hook ran just now
		case r := <-read:
			checkGrowth(t, r.got, r.err)
			return
		case <-time.After(20 * time.Second):
			t.Fatal("the read begun in the drop did not end")
		}
	}
	t.Fatal("no drop came to replay the race")
}

func checkGrowth(t *testing.T, got string, err error) {
	t.Helper()
	require.NoError(t, err)
	require.Equal(t, "b\n", got, "the append returned before the read began")
}

// TestSizeNoteKeepsItsReply replays the same loss for the size a GETATTR
// tells: the size is noted (the kernel zeroes its page past it), a drop of
// that note comes before the kernel applies the reply, and its
// notification makes the kernel throw the reply away. Nothing has grown
// past the note, yet the reader must not be left with the old size.
func TestSizeNoteKeepsItsReply(t *testing.T) {
	fusetest.Require(t)
	l, p := newMountedPartition(t, "s")
	var armed atomic.Bool
	getattrHook = func(n *recordNode, size int64) {
		if size > 0 && armed.CompareAndSwap(true, false) {
			n.ps.kickDrop()
			// Long enough for the notifier's drop to notify the kernel
			// before this reply reaches it.
			time.Sleep(200 * time.Millisecond)
		}
	}
	defer func() { getattrHook = nil }()

	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{NotifyInterval: time.Hour})
	if err != nil {
		fusetest.Unusable(t, err.Error())
	}
	defer func() { require.NoError(t, srv.Unmount()) }()
	f, err := os.Open(filepath.Join(mp, "s", "0", "offset", "0"))
	require.NoError(t, err)
	defer f.Close()

	for _, v := range []string{strings.Repeat("a", 5000), strings.Repeat("b", 3000)} {
		// Sizes inside a page, so that each is noted.
		_, err := p.AppendValues([][]byte{[]byte(v)})
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // the notifier's drop for the append is done
		armed.Store(true)
		got, err := io.ReadAll(f)
		require.NoError(t, err)
		require.Equal(t, len(v)+1, len(got), "the append returned before the read began")
	}
}
