package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// produce and consume take --bootstrap-server: what produce sent, consume
// prints, in both formats and from a time; bad input is one line.
func TestProduceConsumeCluster(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	require.NoError(t, err)
	defer c.Close()
	b := strings.Join(c.ListenAddrs(), ",")
	dir := t.TempDir()
	out := logfs(t, dir, "one\ntwo\nthree", "produce", "--bootstrap-server", b, "orders", "1")
	require.Equal(t, "", out.stdout)
	require.Contains(t, out.stderr, "appended 3 records")
	ok(t, dir, `{"key":"k","value":"four","timestamp":1700000000000}`+"\n", "produce", "--bootstrap-server", b, "--format", "jsonl", "orders", "1")
	require.Equal(t, "one\ntwo\nthree\nfour\n", ok(t, dir, "", "consume", "--bootstrap-server", b, "--offset", "earliest", "orders", "1"))
	require.Equal(t, "three\nfour\n", ok(t, dir, "", "consume", "--bootstrap-server", b, "--offset", "2", "orders", "1"))
	require.Equal(t, `{"offset":3,"timestamp":1700000000000,"key":"k","value":"four"}`+"\n",
		ok(t, dir, "", "consume", "--bootstrap-server", b, "--offset", "3", "--format", "jsonl", "orders", "1"))
	require.Equal(t, "", ok(t, dir, "", "consume", "--bootstrap-server", b, "--offset", "latest", "orders", "1"))
	fails(t, dir, 1, "does not exist yet", "consume", "--bootstrap-server", b, "--offset", "9", "orders", "1")
	fails(t, dir, 1, `no partition 5 of topic "orders"`, "consume", "--bootstrap-server", b, "--offset", "0", "orders", "5")
	fails(t, dir, 2, "-X nonsense", "consume", "--bootstrap-server", b, "-X", "nonsense", "--offset", "0", "orders", "0")
	fails(t, dir, 2, "--isolation-level", "consume", "--isolation-level", "dirty", "--offset", "0", "orders", "0")
	require.Equal(t, "one\ntwo\nthree\nfour\n", ok(t, dir, "", "consume", "--bootstrap-server", b, "--isolation-level", "read_uncommitted", "--offset", "0", "orders", "1"))
	fails(t, dir, 1, "security.protocol", "consume", "--bootstrap-server", b, "-X", "security.protocol=BOGUS", "--offset", "0", "orders", "0")
}
