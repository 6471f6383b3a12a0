package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adv32Limited runs the command under test in dir with its address space
// limited to 4 GiB and a 60 s deadline, so that a runaway allocation (the
// memory a partition number of two billion once asked for) fails in the
// child instead of taking the machine's memory. Not less: each thread's
// stack takes address space, and under load, with 1 GiB, the runtime's
// pthread_create failed now and then.
func adv32Limited(t *testing.T, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v 4194304; exec "$@"`, "sh", logfsBin}, args...)...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "logfs %s hangs", strings.Join(args, " "))
	return result{out.String(), errOut.String(), exitCode(t, err)}
}

// TestAdv32HugePartitionNumber plants an empty partition folder with a
// huge (but valid) partition number beside a topic's partition 0. Kafka's
// rules make "orders-2000000000" a partition folder; whatever logfs makes
// of it, "Nothing ever panics on a bad file" and errors are "one clear
// line on stderr": check, check --repair, consume and produce must neither
// crash (out of memory) nor lose partition 0.
func TestAdv32HugePartitionNumber(t *testing.T) {
	dir := setupConsume(t)
	data := filepath.Join(dir, "logfs-data")
	require.NoError(t, os.Mkdir(filepath.Join(data, "orders-2000000000"), 0o700))
	for _, args := range [][]string{
		{"check"},
		{"consume", "--offset", "0", "orders", "0"},
		{"check", "--repair"},
		{"produce", "orders", "0"},
	} {
		r := adv32Limited(t, dir, args...)
		short := r.stderr[:min(len(r.stderr), 400)]
		require.False(t, strings.Contains(r.stderr, "fatal error") || strings.Contains(r.stderr, "goroutine "),
			"logfs %s crashed: %s", strings.Join(args, " "), short)
		require.LessOrEqual(t, strings.Count(r.stderr, "\n"), 1, "logfs %s: %q", strings.Join(args, " "), short)
	}
	got := ok(t, dir, "", "consume", "--offset", "0", "orders", "0")
	require.True(t, strings.HasPrefix(got, "value 0\nvalue 1\n"), "partition 0 is whole: %q", got[:min(40, len(got))])
	require.Contains(t, got, "value 199\n")
}

// TestAdv32CheckNamesExpiredSegments raises the partition's entry in
// log-start-offset-checkpoint (a hand edit, a bad restore). The next
// writable open removes every segment below it, as documented ("removed:
// retention deleted them ... (reported as expired)"); check's help says it
// "reports what the next writable open would cut". `logfs check` must
// therefore name the segments the next open deletes instead of printing a
// bare OK, and `check --repair` must say what it deleted.
func TestAdv32CheckNamesExpiredSegments(t *testing.T) {
	for _, start := range []string{"150", "100000"} {
		t.Run(start, func(t *testing.T) {
			dir := setupConsume(t)
			data := filepath.Join(dir, "logfs-data")
			ckpt := filepath.Join(data, "log-start-offset-checkpoint")
			b, err := os.ReadFile(ckpt)
			require.NoError(t, err)
			require.Contains(t, string(b), "orders 0 0\n")
			require.NoError(t, os.WriteFile(ckpt, []byte(strings.Replace(string(b), "orders 0 0\n", "orders 0 "+start+"\n", 1)), 0o600))
			first := "00000000000000000000.log"
			require.FileExists(t, filepath.Join(data, "orders-0", first))

			r := logfs(t, dir, "", "check")
			assert.Contains(t, r.stdout, first, "check says nothing of the segment the next open deletes: %s", r.stdout)
			r = logfs(t, dir, "", "check", "--repair")
			require.NoFileExists(t, filepath.Join(data, "orders-0", first))
			assert.Contains(t, r.stdout, first, "check --repair deleted a segment without a word: %s", r.stdout)
		})
	}
}

// TestAdv32RepairEmptySwapKeepsRecords: an empty 00000000000000000000.log.swap
// (a Kafka cleaner's output torn by power loss, or junk) beside intact
// segments. `logfs check` says OK, then `logfs check --repair` renames the
// empty file over the first segment: 194 intact records gone, nothing kept
// aside. SPEC: "Recovery and repair never delete a batch that passes its
// checks".
func TestAdv32RepairEmptySwapKeepsRecords(t *testing.T) {
	dir := setupConsume(t)
	data := filepath.Join(dir, "logfs-data")
	want := ok(t, dir, "", "consume", "--offset", "0", "orders", "0")
	require.NoError(t, os.WriteFile(filepath.Join(data, "orders-0", "00000000000000000000.log.swap"), nil, 0o600))
	r := logfs(t, dir, "", "check")
	t.Logf("check: %d %s", r.code, r.stdout)
	logfs(t, dir, "", "check", "--repair")
	got := logfs(t, dir, "", "consume", "--offset", "0", "orders", "0")
	require.Equal(t, 0, got.code, "consume after repair: %s", got.stderr)
	require.Equal(t, want, got.stdout)
}
