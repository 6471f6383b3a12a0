package bench

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bench/peers, a nested module with a go.sum of its own, imports this
// package: whatever this package depends on, that module must list too.
// go-fuse is not there (the peers never mount), so importing package fs
// here breaks `go build` of bench/peers, which CI does not run (its
// dependencies are the peers' large graphs). This test stands in for it.
func TestNoMountDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		require.False(t, strings.HasPrefix(dep, "github.com/hanwen/go-fuse"), "package bench depends on %s; bench/peers cannot build without it in its go.sum", dep)
	}
}
