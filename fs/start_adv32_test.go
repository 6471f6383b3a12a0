package fs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/storage"
)

// TestAdv32RaisedStart: with the log start raised inside a segment (as
// DeleteRecords on a cluster does, Partition.AdvanceStart), offsets below
// it are ENOENT, offset/ lists what resolves, and time/T shows "records
// from the first one whose timestamp >= T" among the records still there:
// never one stamped before T.
func TestAdv32RaisedStart(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	_, err := p.Append([]storage.Record{
		{Timestamp: 1700000009000, Value: []byte("a")}, // offset 0, deleted below
		{Timestamp: 1700000001000, Value: []byte("b")},
		{Timestamp: 1700000002000, Value: []byte("c")},
	})
	require.NoError(t, err)
	_, err = p.AdvanceStart(1)
	require.NoError(t, err)
	part := filepath.Join(mp, "t", "0")
	_, err = os.Stat(filepath.Join(part, "offset", "0"))
	require.ErrorIs(t, err, os.ErrNotExist)
	b, err := os.ReadFile(filepath.Join(part, "offset", "earliest"))
	require.NoError(t, err)
	require.Equal(t, "b\nc\n", string(b))
	ents, err := os.ReadDir(filepath.Join(part, "offset"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"1", "earliest", "latest"}, names)
	for name, want := range map[string]string{
		"0":             "b\nc\n",
		"1700000001500": "c\n",
		"1700000002000": "c\n",
		"1700000005000": "", // only "a" (deleted) was stamped this late
		"1700000009000": "",
	} {
		b, err := os.ReadFile(filepath.Join(part, "time", name))
		require.NoError(t, err, name)
		require.Equal(t, want, string(b), "time/%s", name)
	}
	b, err = os.ReadFile(filepath.Join(part, "info"))
	require.NoError(t, err)
	var doc partitionInfo
	require.NoError(t, json.Unmarshal(b, &doc))
	require.EqualValues(t, 1, doc.LogStartOffset)
}
