package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// viewBytes renders a partition from an offset through storage.View: what
// the mount's offset/N file holds.
func viewBytes(t *testing.T, dataDir, topic string, id int, f storage.Format, from record.Offset) string {
	t.Helper()
	l, err := storage.Open(dataDir, storage.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	p, err := l.Partition(topic, id)
	require.NoError(t, err)
	v, err := p.NewView(f, from)
	require.NoError(t, err)
	defer v.Close()
	n, err := v.Size()
	require.NoError(t, err)
	b := make([]byte, n)
	_, err = v.ReadAt(b, 0)
	if err != io.EOF {
		require.NoError(t, err)
	}
	return string(b)
}

// setupConsume makes a topic whose records carry known timestamps:
// record i has timestamp 1700000000000 + i*1000.
func setupConsume(t *testing.T) (dir string) {
	dir = t.TempDir()
	ok(t, dir, "", "topic", "create", "--config", "segment.bytes=2048", "orders")
	var in strings.Builder
	for i := range 200 {
		fmt.Fprintf(&in, `{"key":"k%d","value":"value %d","timestamp":%d}`+"\n", i, i, 1700000000000+int64(i)*1000)
	}
	ok(t, dir, in.String(), "produce", "--format", "jsonl", "orders")
	return dir
}

func TestConsumeMatchesView(t *testing.T) {
	dir := setupConsume(t)
	data := filepath.Join(dir, "logfs-data")
	for name, tc := range map[string]struct {
		args []string
		from record.Offset
		f    storage.Format
	}{
		"earliest":          {[]string{"--offset", "earliest"}, 0, storage.Values},
		"offset":            {[]string{"--offset", "57"}, 57, storage.Values},
		"offset jsonl":      {[]string{"--offset", "57", "--format", "jsonl"}, 57, storage.JSONL},
		"latest":            {[]string{"--offset", "latest"}, 200, storage.Values},
		"end":               {[]string{"--offset", "200"}, 200, storage.Values},
		"time seconds":      {[]string{"--time", "1700000100"}, 100, storage.Values},
		"time ms":           {[]string{"--time", "1700000100001"}, 101, storage.Values},
		"time rfc3339":      {[]string{"--time", "2023-11-14T22:15:00Z"}, 100, storage.Values},
		"time before all":   {[]string{"--time", "1"}, 0, storage.Values},
		"time after all":    {[]string{"--time", "2030-01-01T00:00:00Z"}, 200, storage.Values},
		"flags after args":  {[]string{"orders", "0", "--offset", "3"}, 3, storage.Values},
		"shorthand format":  {[]string{"-f", "jsonl", "--offset", "199"}, 199, storage.JSONL},
		"explicit data dir": {[]string{"--data", data, "--offset", "10"}, 10, storage.Values},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"consume"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "orders") {
				args = append(args, "orders", "0")
			}
			got := ok(t, dir, "", args...)
			require.Equal(t, viewBytes(t, data, "orders", 0, tc.f, tc.from), got)
		})
	}
	require.True(t, strings.HasPrefix(ok(t, dir, "", "consume", "--offset", "57", "orders", "0"), "value 57\nvalue 58\n"))
	require.True(t, strings.HasPrefix(ok(t, dir, "", "consume", "--offset", "57", "--format", "jsonl", "orders", "0"),
		`{"offset":57,"timestamp":1700000057000,"key":"k57",`))
}

func TestConsumeErrors(t *testing.T) {
	dir := setupConsume(t)
	for name, tc := range map[string]struct {
		code int
		want string
		args []string
	}{
		"no start":          {exitUsage, "say where to start", []string{"consume", "orders", "0"}},
		"both starts":       {exitUsage, "not both", []string{"consume", "--offset", "1", "--time", "1", "orders", "0"}},
		"bad offset":        {exitUsage, `--offset "first"`, []string{"consume", "--offset", "first", "orders", "0"}},
		"negative offset":   {exitUsage, `--offset "-1"`, []string{"consume", "--offset=-1", "orders", "0"}},
		"bad time":          {exitUsage, `--time "yesterday"`, []string{"consume", "--time", "yesterday", "orders", "0"}},
		"bad format":        {exitUsage, `--format "xml"`, []string{"consume", "--offset", "0", "--format", "xml", "orders", "0"}},
		"missing partition": {exitUsage, "missing PARTITION", []string{"consume", "--offset", "0", "orders"}},
		"missing topic":     {exitUsage, "missing TOPIC", []string{"consume", "--offset", "0"}},
		"invalid topic":     {exitUsage, "invalid topic name", []string{"consume", "--offset", "0", "or/ders", "0"}},
		"bad partition":     {exitUsage, `invalid partition "p0"`, []string{"consume", "--offset", "0", "orders", "p0"}},
		"unknown flag":      {exitUsage, "unknown flag: --from-beginning", []string{"consume", "--from-beginning", "orders", "0"}},
		"beyond end":        {exitFailure, "offset 201 of orders-0 does not exist yet: the log end offset is 200", []string{"consume", "--offset", "201", "orders", "0"}},
		"nonexistent topic": {exitFailure, `no topic "nope"`, []string{"consume", "--offset", "0", "nope", "0"}},
		"no partition":      {exitFailure, `topic "orders" has no partition 1`, []string{"consume", "--offset", "0", "orders", "1"}},
		"follow no topic":   {exitFailure, `no topic "nope"`, []string{"consume", "--follow", "--offset", "0", "nope", "0"}},
		"no data dir":       {exitFailure, "data directory nowhere does not exist", []string{"consume", "--data", "nowhere", "--offset", "0", "orders", "0"}},
	} {
		t.Run(name, func(t *testing.T) {
			fails(t, dir, tc.code, tc.want, tc.args...)
		})
	}
}

// TestConsumeFollow checks that --follow prints what another process
// appends, without polling, and ends with status 0 on SIGINT.
func TestConsumeFollow(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--config", "segment.bytes=1024", "orders")
	ok(t, dir, "old\n", "produce", "orders")

	f := startFollow(t, dir, "--offset", "earliest", "orders", "0")
	cmd, stderr, expect := f.cmd, f.stderr, f.expect
	expect("old")
	ok(t, dir, "new 1\nnew 2\n", "produce", "orders")
	expect("new 1")
	expect("new 2")
	// Enough to roll segments: new files are followed too.
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "rolled %d\n", i)
	}
	ok(t, dir, in.String(), "produce", "orders")
	for i := range 300 {
		expect(fmt.Sprintf("rolled %d", i))
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait(), "stderr: %s", stderr.String())
	require.Empty(t, stderr.String())
}
