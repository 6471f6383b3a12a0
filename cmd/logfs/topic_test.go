package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/storage"
)

func TestTopicLifecycle(t *testing.T) {
	dir := t.TempDir()
	out := ok(t, dir, "", "topic", "create", "--partitions", "3", "--config", "segment.bytes=4096", "-c", "retention.ms=-1", "orders")
	require.Contains(t, out, "created topic orders with 3 partitions")
	// Flags after the name, and --data given explicitly.
	ok(t, dir, "", "topic", "create", "payments", "--data", "./logfs-data", "-p", "1")
	require.FileExists(t, filepath.Join(dir, "logfs-data", "orders.props"))

	require.Equal(t, "orders\npayments\n", ok(t, dir, "", "topic", "list"))

	ok(t, dir, strings.Repeat("a line of forty bytes, more or less....\n", 300), "produce", "orders", "1")
	out = ok(t, dir, "", "topic", "describe", "orders")
	require.Contains(t, out, "topic orders: 3 partitions")
	require.Regexp(t, `segment\.bytes\s+4096\s+set for this topic`, out)
	require.Regexp(t, `retention\.ms\s+-1\s+set for this topic`, out)
	require.Regexp(t, `max\.message\.bytes\s+1048588\s+default`, out)
	require.Contains(t, out, "partition 0: start offset 0, end offset 0, 0 bytes in 1 segment")
	require.Contains(t, out, "partition 1: start offset 0, end offset 300,")
	require.Contains(t, out, "00000000000000000000.log")
	require.Regexp(t, `partition 1: .* in [2-9] segments`, out, "4 KiB segments rolled")
	for _, name := range storage.PropertyNames() {
		require.Contains(t, out, name)
	}

	require.Contains(t, ok(t, dir, "", "topic", "delete", "orders"), "deleted topic orders")
	require.Equal(t, "payments\n", ok(t, dir, "", "topic", "list"))
	require.NoFileExists(t, filepath.Join(dir, "logfs-data", "orders.props"))
	require.NoDirExists(t, filepath.Join(dir, "logfs-data", "orders-0"))
}

func TestTopicErrors(t *testing.T) {
	dir := t.TempDir()
	fails(t, dir, exitFailure, "data directory ./logfs-data does not exist", "topic", "list")
	fails(t, dir, exitFailure, "does not exist", "topic", "describe", "orders")
	ok(t, dir, "", "topic", "create", "orders")
	for name, tc := range map[string]struct {
		code int
		want string
		args []string
	}{
		"no action":          {exitUsage, "missing action", []string{"topic"}},
		"unknown action":     {exitUsage, `unknown action "alter"`, []string{"topic", "alter", "orders"}},
		"missing name":       {exitUsage, "missing NAME", []string{"topic", "create"}},
		"two names":          {exitUsage, `unexpected argument "b"`, []string{"topic", "create", "a", "b"}},
		"invalid name":       {exitUsage, `invalid topic name "a/b"`, []string{"topic", "create", "a/b"}},
		"dot name":           {exitUsage, `invalid topic name ".."`, []string{"topic", "create", ".."}},
		"long name":          {exitUsage, "invalid topic name", []string{"topic", "create", strings.Repeat("x", 250)}},
		"unknown flag":       {exitUsage, "unknown flag: --replicas", []string{"topic", "create", "--replicas", "3", "x"}},
		"zero partitions":    {exitUsage, "--partitions must be from 1 to 1000000, not 0", []string{"topic", "create", "--partitions", "0", "x"}},
		"too many":           {exitUsage, "--partitions must be from 1 to 1000000, not 1000001", []string{"topic", "create", "--partitions", "1000001", "x"}},
		"bad partitions":     {exitUsage, "invalid argument", []string{"topic", "create", "--partitions", "many", "x"}},
		"unknown property":   {exitUsage, `unknown property "cleanup.policy"`, []string{"topic", "create", "--config", "cleanup.policy=compact", "x"}},
		"bad property value": {exitUsage, "segment.bytes", []string{"topic", "create", "--config", "segment.bytes=big", "x"}},
		"not a pair":         {exitUsage, "want name=value", []string{"topic", "create", "--config", "segment.bytes", "x"}},
		"exists":             {exitFailure, `topic "orders" already exists`, []string{"topic", "create", "orders"}},
		"describe missing":   {exitFailure, `no topic "nope"`, []string{"topic", "describe", "nope"}},
		"delete missing":     {exitFailure, `no topic "nope"`, []string{"topic", "delete", "nope"}},
		"list takes no name": {exitUsage, `unexpected argument "orders"`, []string{"topic", "list", "orders"}},
	} {
		t.Run(name, func(t *testing.T) {
			fails(t, dir, tc.code, tc.want, tc.args...)
		})
	}
	// Nothing half-made by the failures.
	require.Equal(t, "orders\n", ok(t, dir, "", "topic", "list"))
	entries, err := os.ReadDir(filepath.Join(dir, "logfs-data"))
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "x"), "left behind: %s", e.Name())
	}
}

// TestTopicDataDirInUse checks that a writable command refuses a data
// directory another process has open, and that reading works beside it.
func TestTopicDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "orders")
	l, err := storage.Open(filepath.Join(dir, "logfs-data"), storage.Options{})
	require.NoError(t, err)
	defer l.Close()
	fails(t, dir, exitFailure, "is in use: another logfs process (a running mount?) has it open for writing: write through the mount or stop it first", "topic", "create", "other")
	fails(t, dir, exitFailure, "is in use: another logfs process (a running mount?) has it open for writing: write through the mount or stop it first", "topic", "delete", "orders")
	require.Equal(t, "orders\n", ok(t, dir, "", "topic", "list"))
	require.Contains(t, ok(t, dir, "", "topic", "describe", "orders"), "partition 0")
}
