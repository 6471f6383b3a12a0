package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Adversarial tests of commit 16c4e74 through the command: a log of logfs's
// own data directory that lost its end below the recovery point goes on
// at the recovery point, past a hole.

// adv33LoseLast sets up orders-0 (offsets 0 to 199 in several segments,
// closed cleanly), deletes its last segment's .log (whole: with its index
// files too) and, unless clean, the clean-shutdown marker. It returns the
// data's working dir, the partition folder and the first offset lost.
func adv33LoseLast(t *testing.T, whole, clean bool) (dir, part string, lost int) {
	t.Helper()
	dir = setupConsume(t)
	part = filepath.Join(dir, "logfs-data", "orders-0")
	logs, err := filepath.Glob(filepath.Join(part, "*.log"))
	require.NoError(t, err)
	sort.Strings(logs)
	require.Greater(t, len(logs), 1)
	last := strings.TrimSuffix(logs[len(logs)-1], ".log")
	lost, err = strconv.Atoi(filepath.Base(last))
	require.NoError(t, err)
	require.Less(t, lost, 200)
	files := []string{last + ".log"}
	if whole {
		files, err = filepath.Glob(last + ".*")
		require.NoError(t, err)
	}
	for _, f := range files {
		require.NoError(t, os.Remove(f))
	}
	if !clean {
		require.NoError(t, os.Remove(filepath.Join(dir, "logfs-data", ".kafka_cleanshutdown")))
	}
	return dir, part, lost
}

func adv33Names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestAdv33CheckNamesLostEnd: README (Holes): when damage takes the end
// of the log below the recovery point ("or its .log deleted"), "the next
// writable open starts a new segment at the recovery point and the lost
// offsets stay a hole; `check` reports it before". Whether the last
// segment went alone (.log) or whole (`rm 000…N.*`, its index files too),
// after a clean or an unclean shutdown, `logfs check` fails, changes
// nothing and names the lost offsets (N to 199), as the commit's own test
// expects for the .log alone.
func TestAdv33CheckNamesLostEnd(t *testing.T) {
	for _, whole := range []bool{false, true} {
		for _, clean := range []bool{false, true} {
			t.Run(fmt.Sprintf("whole=%v/clean=%v", whole, clean), func(t *testing.T) {
				dir, part, lost := adv33LoseLast(t, whole, clean)
				before := adv33Names(t, part)
				r := logfs(t, dir, "", "check")
				require.Equal(t, 1, r.code, "check fails: %s%s", r.stdout, r.stderr)
				require.Equal(t, before, adv33Names(t, part), "check changes nothing")
				require.Contains(t, r.stdout, fmt.Sprintf("offsets %d to 199", lost), "check names the lost offsets:\n%s", r.stdout)
			})
		}
	}
}

// TestAdv33ConsumeAtLostEnd: README (Holes): "a record file or `consume`
// from an offset inside [a hole] fails ... instead of starting later;
// `consume` prints the records before it and exits non-zero, naming the
// missing offsets". The offsets of the deleted last .log were durable
// (below the recovery point) and will never be handed out again: before
// any writable open, `consume` from the first of them must not exit 0
// with nothing, and `consume` from the log start must not exit 0 as if
// the log were whole. (After the writable open both fail with the hole,
// as TestAdv33RepairTwice shows.)
func TestAdv33ConsumeAtLostEnd(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			dir, _, lost := adv33LoseLast(t, false, clean)
			r := logfs(t, dir, "", "consume", "--offset", strconv.Itoa(lost), "orders", "0")
			require.NotEqual(t, 0, r.code, "consume from lost offset %d exits non-zero; stdout %q, stderr %q", lost, r.stdout, r.stderr)
			r = logfs(t, dir, "", "consume", "--offset", "earliest", "orders", "0")
			require.Equal(t, lost, strings.Count(r.stdout, "\n"), "the records before the loss")
			require.NotEqual(t, 0, r.code, "consume from the start exits non-zero at the loss; stderr %q", r.stderr)
		})
	}
}

// TestAdv33RepairTwice: `check --repair` starts the log again at the
// recovery point once: a second repair and a check after it find the same
// one hole, exit 1, create no second segment and set nothing aside; the
// next produce gets offset 200 (never a lost one); consume from inside the
// hole fails naming the missing offsets, consume after it works.
func TestAdv33RepairTwice(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			dir, part, lost := adv33LoseLast(t, false, clean)
			hole := fmt.Sprintf("offsets %d to 199", lost)
			r := logfs(t, dir, "", "check", "--repair")
			require.Equal(t, 1, r.code, "the hole stays: %s%s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, hole)
			after := adv33Names(t, part)
			require.Contains(t, after, "00000000000000000200.log")
			for _, args := range [][]string{{"check", "--repair"}, {"check"}, {"check", "--repair"}} {
				r := logfs(t, dir, "", args...)
				require.Equal(t, 1, r.code, "%v: %s%s", args, r.stdout, r.stderr)
				require.Contains(t, r.stdout, hole, "%v names the hole", args)
				require.NotContains(t, r.stdout, "stray", "%v", args)
				require.Equal(t, after, adv33Names(t, part), "%v: no second segment, nothing set aside", args)
			}
			r = logfs(t, dir, "again\n", "produce", "orders")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stderr, "at offset 200")
			for _, from := range []int{lost, 199} {
				r = logfs(t, dir, "", "consume", "--offset", strconv.Itoa(from), "orders", "0")
				require.NotEqual(t, 0, r.code, "consume from %d", from)
				require.Empty(t, r.stdout)
				require.Contains(t, r.stderr, fmt.Sprintf("offsets %d to 199 are missing", from))
			}
			require.Equal(t, "again\n", ok(t, dir, "", "consume", "--offset", "200", "orders", "0"))
		})
	}
}

// TestAdv33OnlyLogDeleted: the last .log of a partition is also its only
// one (a partition of one segment, offsets 0 to 2, closed cleanly) and is
// deleted. README (Holes): when damage takes the end of the log below the
// recovery point ("or its .log deleted") no offset is handed out twice
// and "`check` reports it before". With no segment left the log starts
// again at the recovery point (README, Holes): check must fail and name
// offsets 0 to 2 before the writable open, the next produce must get
// offset 3, and afterwards offsets 0 to 2 lie below the log start.
func TestAdv33OnlyLogDeleted(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			dir := t.TempDir()
			ok(t, dir, "", "topic", "create", "orders")
			ok(t, dir, "a\nb\nc\n", "produce", "orders")
			data := filepath.Join(dir, "logfs-data")
			require.NoError(t, os.Remove(filepath.Join(data, "orders-0", "00000000000000000000.log")))
			if !clean {
				require.NoError(t, os.Remove(filepath.Join(data, ".kafka_cleanshutdown")))
			}
			r := logfs(t, dir, "", "check")
			require.Equal(t, 1, r.code, "check fails before the writable open: %s%s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, "offsets 0 to 2")

			r = logfs(t, dir, "x\n", "produce", "orders")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stderr, "at offset 3", "no offset is handed out twice")
			r = logfs(t, dir, "", "check")
			require.Equal(t, 0, r.code, "after the writable open the log starts at 3: %s%s", r.stdout, r.stderr)
			r = logfs(t, dir, "", "consume", "--offset", "0", "orders", "0")
			require.NotEqual(t, 0, r.code, "offset 0 is gone: %s", r.stdout)
		})
	}
}
