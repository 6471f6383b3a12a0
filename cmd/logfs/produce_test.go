package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// readAll returns the records of a partition, read through storage.
func readAll(t *testing.T, dataDir, topic string, id int) []record.Record {
	t.Helper()
	l, err := storage.Open(dataDir, storage.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	p, err := l.Partition(topic, id)
	require.NoError(t, err)
	r, err := p.NewReader(p.StartOffset())
	require.NoError(t, err)
	defer r.Close()
	var out []record.Record
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		c := *rec
		c.Key = append([]byte(nil), rec.Key...)
		c.Value = append([]byte(nil), rec.Value...)
		c.Headers = append([]record.Header(nil), rec.Headers...)
		out = append(out, c)
	}
	require.NoError(t, l.Check())
	return out
}

func TestProduceLines(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "logfs-data")
	ok(t, dir, "", "topic", "create", "--partitions", "2", "orders")
	// The last line has no '\n': it is appended at the end of input.
	require.Empty(t, ok(t, dir, "one\ntwo\n\nfour", "produce", "orders"))
	ok(t, dir, "five\n", "produce", "orders", "0")
	ok(t, dir, "p1\n", "produce", "orders", "1", "--data", data)

	recs := readAll(t, data, "orders", 0)
	var values []string
	for i, r := range recs {
		require.Equal(t, record.Offset(i), r.Offset)
		require.Nil(t, r.Key)
		require.NotZero(t, r.Timestamp)
		values = append(values, string(r.Value))
	}
	require.Equal(t, []string{"one", "two", "", "four", "five"}, values)
	require.Equal(t, "p1", string(readAll(t, data, "orders", 1)[0].Value))

	// The complete lines of the first run fit one read and make one
	// batch; "four" waits for the end of input and makes its own, as a
	// partial line written to the mount's append file waits for release.
	out := ok(t, dir, "", "dump", filepath.Join(data, "orders-0", "00000000000000000000.log"))
	require.Equal(t, 3, strings.Count(out, "baseOffset:"))
	require.Contains(t, out, "baseOffset: 0 lastOffset: 2 count: 3 ")
}

func TestProduceJSONL(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "orders")
	in := `{"key":"k1","value":"v1","headers":{"h":"x"},"timestamp":1700000000000}
{"value":{"base64":"AAE="}}
{"offset":9,"key":null,"value":null}
`
	ok(t, dir, in, "produce", "--format", "jsonl", "orders")
	recs := readAll(t, filepath.Join(dir, "logfs-data"), "orders", 0)
	require.Len(t, recs, 3)
	require.Equal(t, "k1", string(recs[0].Key))
	require.Equal(t, "v1", string(recs[0].Value))
	require.Equal(t, int64(1700000000000), recs[0].Timestamp)
	require.Equal(t, []record.Header{{Key: []byte("h"), Value: []byte("x")}}, recs[0].Headers)
	require.Equal(t, []byte{0, 1}, recs[1].Value)
	require.Nil(t, recs[2].Value)
	// What consume --format jsonl prints appends back unchanged.
	printed := ok(t, dir, "", "consume", "--offset", "earliest", "--format", "jsonl", "orders", "0")
	ok(t, dir, "", "topic", "create", "copy")
	ok(t, dir, printed, "produce", "--format", "jsonl", "copy")
	require.Equal(t, printed, ok(t, dir, "", "consume", "--offset", "earliest", "--format", "jsonl", "copy", "0"))
}

// TestProduceSplitsBatchesToFitSegments checks that a read bigger than a
// segment is appended as several batches instead of failing.
func TestProduceSplitsBatchesToFitSegments(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--config", "segment.bytes=16384", "small")
	var in strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&in, "record %d\n", i)
	}
	ok(t, dir, in.String(), "produce", "small")
	recs := readAll(t, filepath.Join(dir, "logfs-data"), "small", 0)
	require.Len(t, recs, 5000)
	require.Equal(t, "record 4999", string(recs[4999].Value))
}

func TestProduceErrors(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--config", "max.message.bytes=200", "orders")
	for name, tc := range map[string]struct {
		code int
		want string
		args []string
	}{
		"missing topic":     {exitUsage, "missing TOPIC", []string{"produce"}},
		"invalid topic":     {exitUsage, `invalid topic name "a b"`, []string{"produce", "a b"}},
		"bad partition":     {exitUsage, `invalid partition "x"`, []string{"produce", "orders", "x"}},
		"negative":          {exitUsage, "unknown shorthand flag: '1' in -1", []string{"produce", "orders", "-1"}},
		"leading zero":      {exitUsage, `invalid partition "01"`, []string{"produce", "orders", "01"}},
		"extra argument":    {exitUsage, `unexpected argument "z"`, []string{"produce", "orders", "0", "z"}},
		"unknown flag":      {exitUsage, "unknown flag: --key", []string{"produce", "--key", "k", "orders"}},
		"bad format":        {exitUsage, `--format "avro"`, []string{"produce", "--format", "avro", "orders"}},
		"nonexistent topic": {exitFailure, `no topic "nope"`, []string{"produce", "nope"}},
		"no such partition": {exitFailure, `topic "orders" has no partition 3`, []string{"produce", "orders", "3"}},
	} {
		t.Run(name, func(t *testing.T) {
			fails(t, dir, tc.code, tc.want, tc.args...)
		})
	}

	// A line over max.message.bytes: nothing of its read is appended.
	big := strings.Repeat("x", 300)
	r := logfs(t, dir, "a\n"+big+"\nb\n", "produce", "orders")
	requireOneLineError(t, r, exitFailure, "line 2: a record of")
	// A bad JSON line: nothing of its read is appended.
	r = logfs(t, dir, "{\"value\":\"ok\"}\nnot json\n", "produce", "--format", "jsonl", "orders")
	requireOneLineError(t, r, exitFailure, "line 2:")
	require.Empty(t, readAll(t, filepath.Join(dir, "logfs-data"), "orders", 0))
}
