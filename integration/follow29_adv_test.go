package integration

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// catEventually29 polls cat of file until it shows want, for 30 s, and
// fails with what it showed last.
func catEventually29(t *testing.T, what, file, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := exec.Command("cat", file).Output()
		if string(out) == want {
			return
		}
		if time.Now().After(deadline) {
			i := firstDiff(string(out), want)
			t.Fatalf("%s: cat %s shows %d bytes, want %d; first difference at %d: got %q want %q", what, file, len(out), len(want), i, clip29(out, i), clip29([]byte(want), i))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRead29FollowCleaned: on a followed mount, offset/0 read once (its
// pages kept by the kernel), then the broker's cleaner replaces the first
// segment by one that keeps half its batches. Once the log shows the
// cleaned segment, a new open of offset/0 reads it (README: new readers
// read the cleaned segment): the bytes the kernel kept from before are
// other records now, and must not be served. The file spans pages, so
// that the first segment's are not the last page, which is dropped anyway
// (read short).
//
// The follower may list the folder between the swap's renames, when the
// first segment has no .log, only its .swap: the log start must stay
// (storage's TestFollow29MidSwap has that case for certain).
func TestRead29FollowCleaned(t *testing.T) {
	for _, directIO := range []bool{false, true} {
		t.Run(fmt.Sprintf("directio=%v", directIO), func(t *testing.T) {
			for range 3 {
				followCleaned29(t, directIO)
			}
		})
	}
}

// followCleaned29 is one round of TestRead29FollowCleaned.
func followCleaned29(t *testing.T, directIO bool) {
	data := t.TempDir()
	b := startBroker(t, data)
	b.do("write 400")
	end := b.do("checkpoint")
	l := openLog(t, data, storage.Options{ReadOnly: true, Follow: true})
	mnt := mount(t, l, fs.Options{DirectIO: directIO})
	file := filepath.Join(part(mnt, "live", 0), "offset", "0")
	require.Equal(t, expectedValues(0, end, nil), sh(t, "cat %s", q(file)))
	// The broker rolls every 2 KiB: the first segment ends where the
	// second listed begins.
	bases := strings.Fields(sh(t, "ls %s | grep -v '[a-z]' | sort -n", q(filepath.Dir(file))))
	require.Greater(t, len(bases), 2)
	next, err := strconv.Atoi(bases[1])
	require.NoError(t, err)
	b.do("clean 0")
	keep := func(o record.Offset) bool { return o >= record.Offset(next) || o%2 == 0 }
	want := expectedValues(0, end, keep)
	p := followed29(t, l)
	deadline := time.Now().Add(30 * time.Second)
	for tryRender29(p) != want {
		require.Zero(t, p.StartOffset(), "the follower took the swapped segment for deleted")
		require.True(t, time.Now().Before(deadline), "the follower never showed the cleaned segment")
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, want, sh(t, "cat %s", q(file)), "the first cat once the log shows the clean")
}

// followed29 returns partition live-0 of l.
func followed29(t *testing.T, l *storage.Log) *storage.Partition {
	top, err := l.Topic("live")
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	return p
}

// TestRead29FollowTruncatedUncommitted: read_uncommitted shows records
// past the high watermark; offset/0 read once (its pages kept by the
// kernel), then a truncation cuts the last records, pages of them, and
// the broker writes others at the same offsets. Once the log shows them,
// a new open of offset/0 does, never the bytes of the records cut.
func TestRead29FollowTruncatedUncommitted(t *testing.T) {
	for _, directIO := range []bool{false, true} {
		t.Run(fmt.Sprintf("directio=%v", directIO), func(t *testing.T) {
			data := t.TempDir()
			b := startBroker(t, data)
			b.do("write 20")
			hw := b.do("checkpoint")
			end := b.do("write 300")
			l := openLog(t, data, storage.Options{ReadOnly: true, Follow: true, Isolation: storage.ReadUncommitted})
			mnt := mount(t, l, fs.Options{DirectIO: directIO})
			file := filepath.Join(part(mnt, "live", 0), "offset", "0")
			catEventually29(t, "before the cut", file, expectedValues(0, end, nil))
			cut := b.do("truncate " + strconv.Itoa(int(hw)))
			cutAt = cut
			defer func() { cutAt = 1 << 62 }()
			p := followed29(t, l)
			// The follower sees the cut before the broker writes past it.
			eventually(t, "the follower to see the cut", func() bool { return tryRender29(p) == expectedValues(0, hw, nil) })
			end = b.do("write 400")
			want := expectedValues(0, end, nil)
			eventually(t, "the follower to see the records after the cut", func() bool { return tryRender29(p) == want })
			require.Equal(t, want, sh(t, "cat %s", q(file)), "the first cat once the log shows the cut")
		})
	}
}

// tryRender29 is the values rendering of p from offset 0 as a view reads
// it now, or "" if the view cannot read it whole (a batch the broker is
// still writing).
func tryRender29(p *storage.Partition) string {
	v, err := p.NewView(storage.Values, 0)
	if err != nil {
		return ""
	}
	defer v.Close()
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := v.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if err == io.EOF || err == nil && n == 0 {
			return string(out)
		}
		if err != nil {
			return ""
		}
	}
}
