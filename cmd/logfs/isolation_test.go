package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
)

// txnDataDir writes a broker partition tx-0: a committed and an aborted
// transaction of two producers interleaved with plain records, across
// segments, and a transaction left open before the last plain record.
func txnDataDir(t *testing.T) (dir string) {
	dir = t.TempDir()
	data := filepath.Join(dir, "logfs-data")
	p, err := broker.Create(data, "tx", 0, broker.Options{SegmentBytes: 300})
	require.NoError(t, err)
	write := func(pid int64, txnl bool, v string) {
		_, err := p.Write(pid, txnl, v)
		require.NoError(t, err)
	}
	marker := func(pid int64, typ record.ControlType) {
		_, err := p.Marker(pid, typ)
		require.NoError(t, err)
	}
	write(-1, false, "plain1")
	write(1, true, "commit1")
	write(2, true, "abort1")
	write(-1, false, "plain2")
	write(1, true, "commit2")
	write(2, true, "abort2")
	marker(2, record.ControlAbort)
	marker(1, record.ControlCommit)
	write(-1, false, "plain3")
	write(3, true, "open1") // offset 9: the last stable offset
	write(-1, false, "plain4")
	require.NoError(t, p.Close())
	return dir
}

func TestConsumeIsolationLevel(t *testing.T) {
	dir := txnDataDir(t)
	require.Equal(t, "plain1\ncommit1\nplain2\ncommit2\nplain3\n", ok(t, dir, "", "consume", "--offset", "earliest", "tx", "0"))
	require.Equal(t, "plain1\ncommit1\nplain2\ncommit2\nplain3\n",
		ok(t, dir, "", "consume", "--isolation-level", "read_committed", "--offset", "0", "tx", "0"))
	require.Equal(t, "plain1\ncommit1\nabort1\nplain2\ncommit2\nabort2\nplain3\nopen1\nplain4\n",
		ok(t, dir, "", "consume", "--isolation-level", "read_uncommitted", "--offset", "earliest", "tx", "0"))
	require.Equal(t, "commit2\nplain3\n", ok(t, dir, "", "consume", "--offset", "4", "tx", "0"))
	// latest is the last stable offset in read_committed, the log end
	// otherwise; nothing is printed from either.
	require.Empty(t, ok(t, dir, "", "consume", "--offset", "latest", "tx", "0"))
	require.Empty(t, ok(t, dir, "", "consume", "--offset", "9", "tx", "0"))
	fails(t, dir, exitFailure, "does not exist yet: the log end offset is 9", "consume", "--offset", "10", "tx", "0")
	require.Equal(t, "plain4\n", ok(t, dir, "", "consume", "--isolation-level", "read_uncommitted", "--offset", "10", "tx", "0"))
	fails(t, dir, exitUsage, "--isolation-level \"dirty\": want read_committed or read_uncommitted",
		"consume", "--isolation-level", "dirty", "--offset", "0", "tx", "0")
}
