package storage

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// A full disk mid-append leaves nothing of the batch: the short write is cut
// back, the offset is not consumed, and the next append lands cleanly.
func TestShortWriteLeavesNothing(t *testing.T) {
	fs := crashfs.New(vfs.Default)
	l := openLog(t, t.TempDir(), Options{FS: fs})
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, _ := top.Partition(0)
	_, err = p.Append(values(3, "before"))
	require.NoError(t, err)
	size := p.Size()

	fs.ShortWriteAfter(fs.Ops(), rand.New(rand.NewPCG(1, 2)))
	_, err = p.Append(values(50, "lost"))
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
	require.Equal(t, record.Offset(3), p.EndOffset())
	require.Equal(t, size, p.Size())

	first, err := p.Append(values(2, "after"))
	require.NoError(t, err)
	require.Equal(t, record.Offset(3), first)
	require.Equal(t, []string{"0:before-0", "1:before-1", "2:before-2", "3:after-0", "4:after-1"}, readAll(t, p, 0))
}
