package kafka_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// A max.message.bytes raised on the cluster while mounted lets a line
// over the old limit through when a program writes it 4 KiB at a time
// (the line grows over several writes before its newline), for append
// and append.jsonl; lowered again, such a line is EFBIG and nothing of it
// is produced.
func TestLimitRaisedOnTheClusterLineInChunks(t *testing.T) {
	c := fakeCluster(t)
	adm := kadm.NewClient(client(t, c))
	adv34pTopic(t, adm, "chunks", "4096")
	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	require.NoError(t, appendLine(t, filepath.Join(mp, "chunks/0/append"), "first"))

	adv34pSetLimit(t, adm, "chunks", "1048588")
	long := strings.Repeat("x", 12000)
	require.NoError(t, appendLine(t, filepath.Join(mp, "chunks/0/append"), long))
	require.NoError(t, appendLine(t, filepath.Join(mp, "chunks/0/append.jsonl"), `{"value":"`+long+`"}`))
	recs := consumeAll(t, c, "chunks", 0, 3)
	require.Equal(t, long, string(recs[1].Value))
	require.Equal(t, long, string(recs[2].Value))

	adv34pSetLimit(t, adm, "chunks", "4096")
	err := appendLine(t, filepath.Join(mp, "chunks/0/append"), long)
	require.ErrorIs(t, err, syscall.EFBIG)
	require.NoError(t, appendLine(t, filepath.Join(mp, "chunks/0/append"), "last"))
	recs = consumeAll(t, c, "chunks", 0, 4)
	require.Len(t, recs, 4)
	require.Equal(t, "last", string(recs[3].Value), "nothing of the refused line")
}

// appendLine writes line and a newline in 4 KiB writes, as a program
// with a 4 KiB buffer does, and closes.
func appendLine(t *testing.T, path, line string) error {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	data := []byte(line + "\n")
	var werr error
	for len(data) > 0 && werr == nil {
		n := min(len(data), 4096)
		_, werr = f.Write(data[:n])
		data = data[n:]
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// A write that times out on the cluster (REQUEST_TIMED_OUT, and the
// broker appended it) takes the buffered start of its first line with it:
// the same bytes sent again are refused (no second copy), and the next
// line is not joined to that start.
func TestTimedOutWriteKeepsNoPartialLine(t *testing.T) {
	c, mp, f := timeoutAppend(t, "tp")
	_, err := f.Write([]byte("first\npar"))
	require.NoError(t, err)

	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "tp", Err: kerr.RequestTimedOut, Count: -1})
	_, err = f.Write([]byte("tial\n"))
	require.ErrorIs(t, err, syscall.ETIMEDOUT)
	h.Remove()
	_, err = f.Write([]byte("tial\n"))
	require.ErrorIs(t, err, syscall.ETIMEDOUT, "the same bytes again")
	_, err = f.Write([]byte("next\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"first", "partial", "next"}, adv34pValues(t, c, "tp", 3))
	require.Equal(t, "first\npartial\nnext\n", readFile(t, filepath.Join(mp, "tp/0/offset/0")))
}
