package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/storage"
)

// A record must fit a batch of its own under segment.bytes as well as
// max.message.bytes (Kafka refuses a batch larger than a segment). With
// segment.bytes the smaller, a line too big for it is refused with EFBIG
// like one over max.message.bytes, whether it comes whole or in pieces,
// and the open file goes on taking the lines after it: the refused line
// must not stay behind as the start of every later line. Found by the
// review of stop 26 (a partial line of 80 bytes and segment.bytes=150
// refused every write after it).
func TestLineOverSegmentBytesIsRefusedAlone(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "s", storage.Overrides{"segment.bytes": 150})
	mnt := mount(t, l, fs.Options{})
	f, err := os.OpenFile(filepath.Join(part(mnt, "s", 0), "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	write := func(s string) error {
		n, err := f.Write([]byte(s))
		if err == nil {
			require.Equal(t, len(s), n)
		}
		return err
	}
	big := string(make([]byte, 85)) // with its framing, more than 150 bytes

	require.NoError(t, write("a\n"))
	// In pieces: the start is held, the end is refused.
	require.NoError(t, write(big))
	require.ErrorIs(t, write("y\n"), syscall.EFBIG)
	require.NoError(t, write("ok\n"))
	require.NoError(t, write("ok2\n"))
	// Whole, and among lines that fit: the write is refused, nothing of it
	// appended, and the next one taken.
	require.ErrorIs(t, write(big+"y\n"), syscall.EFBIG)
	require.ErrorIs(t, write("b\n"+big+"\nc\n"), syscall.EFBIG)
	require.NoError(t, write("ok3\n"))
	require.Equal(t, []string{"a", "ok", "ok2", "ok3"}, partitionValues(t, p))
}

// The same through append.jsonl, whose lines are checked as records once
// parsed: a value too big for segment.bytes, sent in pieces, is refused,
// and the file goes on taking records.
func TestJSONLineOverSegmentBytesIsRefusedAlone(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "j", storage.Overrides{"segment.bytes": 150})
	mnt := mount(t, l, fs.Options{})
	f, err := os.OpenFile(filepath.Join(part(mnt, "j", 0), "append.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	write := func(s string) error {
		_, err := f.Write([]byte(s))
		return err
	}
	require.NoError(t, write(`{"value":"a"}`+"\n"))
	require.NoError(t, write(`{"value":"`+strings.Repeat("x", 85)))
	require.ErrorIs(t, write(`y"}`+"\n"), syscall.EFBIG)
	require.NoError(t, write(`{"value":"ok"}`+"\n"))
	require.Equal(t, []string{"a", "ok"}, partitionValues(t, p))
}
