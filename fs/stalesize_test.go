package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
)

// TestStaleSizeZeroesNoRecord replays, in order, a race that served zeros
// as records: a GETATTR reply that the kernel applies after a read filled
// the page that holds its size with the records past it. The kernel zeroes
// that page past the size it is told (truncate_pagecache, as for a file
// extended by truncate); once it learns a larger size, it served those
// zeros. The size told must be dropped like a short read's end.
func TestStaleSizeZeroesNoRecord(t *testing.T) {
	fusetest.Require(t)
	l, p := newMountedPartition(t, "z")
	var want bytes.Buffer
	add := func(vs ...string) {
		t.Helper()
		var values [][]byte
		for _, v := range vs {
			values = append(values, []byte(v))
			want.WriteString(v + "\n")
		}
		_, err := p.AppendValues(values)
		require.NoError(t, err)
	}
	add(strings.Repeat("a", 1000)) // 1001 bytes: the size lies inside page 0

	arrived, release := make(chan int64, 1), make(chan struct{})
	armed := false
	getattrHook = func(_ *recordNode, size int64) {
		if armed {
			armed = false
			arrived <- size
			<-release
		}
	}
	defer func() { getattrHook = nil }()

	mp := t.TempDir()
	srv, err := Mount(mp, l, Options{})
	if err != nil {
		fusetest.Unusable(t, err.Error())
	}
	defer func() { require.NoError(t, srv.Unmount()) }()
	name := filepath.Join(mp, "z", "0", "offset", "0")
	a, err := os.Open(name)
	require.NoError(t, err)
	defer a.Close()
	b, err := os.Open(name)
	require.NoError(t, err)
	defer b.Close()
	st, err := b.Stat()
	require.NoError(t, err)
	require.EqualValues(t, 1001, st.Size())

	add("bbbbbbbbb") // 1011 bytes
	armed = true
	stated := make(chan error, 1)
	go func() { _, err := a.Stat(); stated <- err }()
	require.EqualValues(t, 1011, <-arrived) // held back
	for range 8 {
		add(strings.Repeat("c", 999)) // past page 0
	}
	// Within the size the kernel knows (1001), so no GETATTR: page 0 is
	// read whole, with records past 1011.
	head := make([]byte, 500)
	_, err = b.ReadAt(head, 0)
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-stated)

	got := make([]byte, want.Len())
	k, err := b.ReadAt(got, 0)
	require.Equal(t, want.Len(), k, "%v", err)
	for i := range got {
		if got[i] != want.Bytes()[i] {
			t.Fatalf("byte %d of %d differs: got %q, want %q", i, k, got[i:min(i+16, k)], want.Bytes()[i:min(i+16, k)])
		}
	}
}
