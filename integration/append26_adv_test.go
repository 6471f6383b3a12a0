package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// longestLine26 is the longest line (without its newline) whose record
// fits a batch of its own under maxMessage, measured with
// record.RecordSize, not with storage's shortcut.
func longestLine26(maxMessage int64) int {
	buf := make([]byte, maxMessage)
	for n := int(maxMessage) - 1; n >= 0; n-- {
		if int64(record.HeaderSize+record.RecordSize(0, 0, nil, buf[:n], nil)) <= maxMessage {
			return n
		}
	}
	return -1
}

// line26 is a line of n bytes (without its newline) that tells its
// length and never holds a newline.
func line26(n int, c byte) string { return strings.Repeat(string(c), n) }

// TestAppend26LinesAtTheLimit writes lines to an append file at the edges
// of a small max.message.bytes set on the topic: the lengths around
// SureFit and the longest line that fits, in one write and split over
// writes, then one byte more, alone, among other lines, and as a partial
// line joined with the next write. The lines that fit read back as
// written; a write holding a line one byte over fails with EFBIG and
// appends nothing, and what follows it is appended as written, with no
// byte of the refused line. Then the limit changes under the open file,
// down to one where only an empty line fits.
func TestAppend26LinesAtTheLimit(t *testing.T) {
	const limit = 200
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "e", storage.Overrides{"max.message.bytes": limit})
	mnt := mount(t, l, fs.Options{})
	cfg := p.Topic().Config()
	fit, exact := cfg.SureFit(), longestLine26(limit)
	require.Greater(t, exact, fit, "the shortcut is short of the exact edge")
	f, err := os.OpenFile(filepath.Join(part(mnt, "e", 0), "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()

	var want []string
	write := func(s string) {
		t.Helper()
		n, err := f.Write([]byte(s))
		require.NoError(t, err)
		require.Equal(t, len(s), n)
	}
	refused := func(s string) {
		t.Helper()
		end := p.EndOffset()
		_, err := f.Write([]byte(s))
		require.ErrorIs(t, err, syscall.EFBIG)
		require.Equal(t, end, p.EndOffset(), "a refused write appended records")
	}
	check := func(what string) {
		t.Helper()
		require.Equal(t, want, partitionValues(t, p), what)
	}

	// One write of lines at every edge that fits.
	var one strings.Builder
	for i, n := range []int{0, 1, fit - 1, fit, fit + 1, exact - 1, exact, 0} {
		s := line26(n, byte('a'+i))
		one.WriteString(s + "\n")
		want = append(want, s)
	}
	write(one.String())
	check("one write of lines at the edges")

	// Each alone, one write per line.
	for i, n := range []int{fit, fit + 1, exact} {
		s := line26(n, byte('k'+i))
		write(s + "\n")
		want = append(want, s)
	}
	check("lines one write each")

	over := line26(exact+1, 'X')
	refused(over + "\n")
	check("a line one byte over")
	refused("ok\n" + over + "\nok2\n")
	check("a line one byte over among lines that fit")
	refused(line26(exact, 'a') + "\n" + over + "\n")
	check("a line one byte over after the longest that fits")
	write("after\n")
	want = append(want, "after")
	check("the line after the refused write")

	// A partial line joined with the next write: exactly the limit, then
	// one byte over (the partial is dropped, the next line is its own).
	write(line26(exact-5, 'p'))
	write(line26(5, 'q') + "\n")
	want = append(want, line26(exact-5, 'p')+line26(5, 'q'))
	check("a split line of the longest length")
	write(line26(fit, 'r'))
	write(line26(exact-fit, 's') + "\nt\n")
	want = append(want, line26(fit, 'r')+line26(exact-fit, 's'), "t")
	check("a split line of the longest length, then another line")
	write(line26(exact-5, 'P'))
	refused(line26(6, 'Q') + "\nnot this\n")
	check("a split line one byte over")
	write("next\n")
	want = append(want, "next")
	check("the line after a refused split line")
	write(line26(exact+1, 'Y')) // not yet too long to hold
	refused("\n")
	write("next2\n")
	want = append(want, "next2")
	check("a partial line one byte over, ended by the next write")

	// The limit changes under the open file: the longest line is refused
	// one byte lower, taken again when the limit is back.
	require.NoError(t, p.Topic().SetConfig(storage.Overrides{"max.message.bytes": limit - 1}))
	refused(line26(exact, 'Z') + "\n")
	write(line26(longestLine26(limit-1), 'z') + "\n")
	want = append(want, line26(longestLine26(limit-1), 'z'))
	check("one byte lower")

	// So low that SureFit is below zero: only an empty line fits.
	tiny := int64(record.HeaderSize + 7)
	require.Equal(t, 0, longestLine26(tiny))
	require.NoError(t, p.Topic().SetConfig(storage.Overrides{"max.message.bytes": tiny}))
	tinyCfg := p.Topic().Config()
	require.Negative(t, tinyCfg.SureFit())
	write("\n\n")
	want = append(want, "", "")
	refused("a\n")
	refused("\na\n")
	write("\n")
	want = append(want, "")
	check("max.message.bytes of an empty value's batch")

	require.NoError(t, p.Topic().SetConfig(storage.Overrides{"max.message.bytes": limit}))
	write(line26(exact, 'E') + "\n")
	want = append(want, line26(exact, 'E'))
	check("the limit back")
	require.NoError(t, f.Close())
	for _, v := range partitionValues(t, p) {
		require.NotContains(t, v, "X")
		require.NotContains(t, v, "Y")
		require.NotContains(t, v, "Q")
	}
}

// TestAppend26DefaultLimitLines: at Kafka's default max.message.bytes,
// lines of SureFit bytes, one more, and the longest that fits go in,
// written whole (the kernel splits them over FUSE requests); a line one
// byte longer fails with EFBIG and leaves nothing of itself.
func TestAppend26DefaultLimitLines(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "d", nil)
	mnt := mount(t, l, fs.Options{})
	cfg := p.Topic().Config()
	require.Equal(t, storage.DefaultConfig().MaxMessageBytes, cfg.MaxMessageBytes)
	fit, exact := cfg.SureFit(), longestLine26(cfg.MaxMessageBytes)
	f, err := os.OpenFile(filepath.Join(part(mnt, "d", 0), "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	var want []string
	for i, n := range []int{fit, fit + 1, exact} {
		s := line26(n, byte('a'+i))
		_, err := f.Write([]byte(s + "\n"))
		require.NoError(t, err, "a line of %d bytes", n)
		want = append(want, s)
	}
	_, err = f.Write([]byte(line26(exact+1, 'X') + "\n"))
	require.ErrorIs(t, err, syscall.EFBIG)
	_, err = f.Write([]byte("after\n"))
	require.NoError(t, err)
	want = append(want, "after")
	require.NoError(t, f.Close())
	got := partitionValues(t, p)
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.True(t, bytes.Equal([]byte(want[i]), []byte(got[i])), "record %d: %d bytes, want %d", i, len(got[i]), len(want[i]))
	}
}
