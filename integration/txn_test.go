package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// TestMountTransactions mounts a broker's partition holding committed,
// aborted and open transactions of interleaved producers across segments:
// read_committed (the default) shows what kcat shows, read_uncommitted
// every data record; sizes are exact and dd at any offset agrees with cat.
func TestMountTransactions(t *testing.T) {
	data := t.TempDir()
	p, err := broker.Create(data, "tx", 0, broker.Options{SegmentBytes: 300})
	require.NoError(t, err)
	for _, w := range []struct {
		pid  int64
		txnl bool
		v    string
	}{{-1, false, "plain1"}, {1, true, "commit1"}, {2, true, "abort1"}, {-1, false, "plain2"}, {1, true, "commit2"}, {2, true, "abort2"}} {
		_, err := p.Write(w.pid, w.txnl, w.v)
		require.NoError(t, err)
	}
	_, err = p.Marker(2, record.ControlAbort)
	require.NoError(t, err)
	_, err = p.Marker(1, record.ControlCommit)
	require.NoError(t, err)
	_, err = p.Write(-1, false, "plain3")
	require.NoError(t, err)
	_, err = p.Write(3, true, "open1")
	require.NoError(t, err)
	_, err = p.Write(-1, false, "plain4")
	require.NoError(t, err)
	require.NoError(t, p.Close())

	for _, c := range []struct {
		iso          storage.Isolation
		all, latest  string
		latestOffset string
	}{
		{storage.ReadCommitted, "plain1\ncommit1\nplain2\ncommit2\nplain3\n", "", "9"},
		{storage.ReadUncommitted, "plain1\ncommit1\nabort1\nplain2\ncommit2\nabort2\nplain3\nopen1\nplain4\n", "", "11"},
	} {
		t.Run(c.iso.String(), func(t *testing.T) {
			l := openLog(t, data, storage.Options{ReadOnly: true, Isolation: c.iso})
			mnt := mount(t, l, fs.Options{})
			dir := part(mnt, "tx", 0)
			off := func(name string) string { return q(filepath.Join(dir, "offset", name)) }
			require.Equal(t, c.all, sh(t, "cat %s", off("0")))
			st, err := os.Stat(filepath.Join(dir, "offset", "0"))
			require.NoError(t, err)
			require.Equal(t, int64(len(c.all)), st.Size())
			for at := 0; at < len(c.all); at += 3 {
				require.Equal(t, c.all[at:], sh(t, "dd if=%s bs=1 skip=%d status=none", off("0"), at))
			}
			require.Equal(t, c.latest, sh(t, "cat %s", off("latest")))
			require.Contains(t, sh(t, "ls %s", q(filepath.Join(dir, "offset"))), "latest")
			require.Equal(t, "plain2\ncommit2\n", sh(t, "head -n 2 %s", off("3")))
			info := sh(t, "cat %s", q(filepath.Join(dir, "info")))
			require.Contains(t, info, `"log_end_offset": `+c.latestOffset)
		})
	}
}
