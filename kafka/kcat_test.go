package kafka_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// requireKcat returns the path of Debian's kcat, skipping the test when it
// is missing (failing under CI=true, where .ci/run installs it).
func requireKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat not found, and CI=true: .ci/run installs it (apt-get install kcat)")
		}
		t.Skip("kcat not found: install Debian's kcat (apt-get install kcat) to cross-check the mount with a client nobody here wrote")
	}
	return path
}

// kcat runs kcat against the cluster and returns its stdout.
func kcat(t *testing.T, bin string, c *kfake.Cluster, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-b", strings.Join(c.ListenAddrs(), ","), "-q"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kcat %v: %s", args, stderr.String())
	return out
}

// The mount's bytes equal what kcat, a client nobody here wrote, consumes:
// offset/N against kcat -o N, time/T against kcat -o s@T; and kcat sees
// what was appended through the mount.
func TestKcatCrossCheck(t *testing.T) {
	bin := requireKcat(t)
	c := fakeCluster(t, kfake.SeedTopics(1, "kc"))
	var in bytes.Buffer
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&in, "line %d %s\n", i, strings.Repeat("k", i%300))
	}
	// In two runs, so that the records carry two different times.
	half := bytes.Index(in.Bytes(), []byte("line 1500 "))
	kcat(t, bin, c, in.Bytes()[:half], "-P", "-t", "kc", "-p", "0")
	kcat(t, bin, c, in.Bytes()[half:], "-P", "-t", "kc", "-p", "0")

	_, mp := mounted(t, c, kafka.Options{}, fs.Options{})
	dir := filepath.Join(mp, "kc/0")
	for _, n := range []int{0, 1, 999, 1500, 2999, 3000} {
		want := kcat(t, bin, c, nil, "-C", "-t", "kc", "-p", "0", "-o", strconv.Itoa(n), "-e")
		require.Equal(t, string(want), readFile(t, filepath.Join(dir, "offset", strconv.Itoa(n))), "offset/%d", n)
	}
	stamps := strings.Fields(string(kcat(t, bin, c, nil, "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e", "-f", "%T\n")))
	require.Len(t, stamps, 3000)
	for _, i := range []int{0, 1499, 1500, 2999} {
		ts := stamps[i]
		want := kcat(t, bin, c, nil, "-C", "-t", "kc", "-p", "0", "-o", "s@"+ts, "-e")
		require.Equal(t, string(want), readFile(t, filepath.Join(dir, "time", ts)), "time/%s", ts)
	}

	_, err := appendTo(filepath.Join(dir, "append"), []byte("from the mount 1\nfrom the mount 2\n"))
	require.NoError(t, err)
	got := kcat(t, bin, c, nil, "-C", "-t", "kc", "-p", "0", "-o", "3000", "-e")
	require.Equal(t, "from the mount 1\nfrom the mount 2\n", string(got))
	require.Equal(t, string(got), readFile(t, filepath.Join(dir, "offset/3000")))
}
