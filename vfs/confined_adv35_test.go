package vfs

// An adversarial review of Confined (adv35): every method of FS, on every
// kind of entry a hostile user who can write into a data directory can
// plant, with both resolvers; races that swap a folder for a link between
// the steps of an operation; and the spellings a path can take. Outside the
// root a sentinel tree is kept and checked byte for byte, and by listing,
// after every attack. This file holds what the others share.

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// advEnv is a data directory (root) and, beside it, a sentinel tree (out)
// that nothing done through fs may change.
type advEnv struct {
	base, root, out string
	fs              FS
	want            map[string]string // out, as it must stay
	wantBase        []string          // base's listing, as it must stay

	mu      sync.Mutex
	reports map[string][]error
}

const preciousBytes = "precious bytes"

func newAdvEnv(t *testing.T) *advEnv {
	t.Helper()
	base := t.TempDir()
	e := &advEnv{base: base, root: filepath.Join(base, "data"), out: filepath.Join(base, "outside"), reports: map[string][]error{}}
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "p"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "p", "0.log"), []byte("ours"), 0o600))
	for name, data := range map[string]string{
		"precious":                           preciousBytes,
		"0.log":                              "outside log",
		"sub/deep":                           "deep bytes",
		"t-0/00000000000000000000.log":       "outside segment",
		"t-0/00000000000000000000.index":     "outside index",
		"deep/deeper/precious":               "deeper bytes",
		"p/0.log":                            "outside p",
		"recovery-point-offset-checkpoint":   "outside checkpoint",
		"recovery-point-offset-checkpoint.x": "outside",
	} {
		p := filepath.Join(e.out, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	}
	e.fs = Confined(e.root, func(path string, err error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.reports[path] = append(e.reports[path], err)
	})
	e.want = advSnapshot(t, e.out)
	e.wantBase = advList(t, base)
	return e
}

// advSnapshot describes every entry below dir without following a link:
// its kind, permission bits and inode, and a regular file's bytes.
func advSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(p, &st))
		desc := os.FileMode(st.Mode & 0o7777).String()
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			desc += " file " + string(b)
		case unix.S_IFDIR:
			desc += " dir"
		default:
			desc += " other"
		}
		out[p] = desc + " ino " + strconv.FormatUint(st.Ino, 10)
		return nil
	}))
	return out
}

func advList(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// untouched fails unless the sentinel tree is exactly as it was and
// nothing was made beside the root.
func (e *advEnv) untouched(t *testing.T, step string) {
	t.Helper()
	require.Equal(t, e.want, advSnapshot(t, e.out), "the sentinel tree after %s", step)
	require.Equal(t, e.wantBase, advList(t, e.base), "nothing is made beside the root after %s", step)
}

func (e *advEnv) reported() map[string][]error {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string][]error{}
	for k, v := range e.reports {
		out[k] = append([]error(nil), v...)
	}
	return out
}

// requireReports fails unless exactly the entries of want were reported,
// each once and with its error.
func (e *advEnv) requireReports(t *testing.T, want map[string]error, step string) {
	t.Helper()
	got := e.reported()
	names := func(m map[string][]error) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	var wantNames []string
	for k := range want {
		wantNames = append(wantNames, k)
	}
	sort.Strings(wantNames)
	require.Equal(t, wantNames, names(got), "what %s reported", step)
	for k, err := range want {
		require.Len(t, got[k], 1, "%s reported %s once", step, k)
		require.ErrorIs(t, got[k][0], err, "%s reported %s", step, k)
	}
}

// kindOf says what the entry at p is, without following it.
func kindOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	err := unix.Lstat(p, &st)
	if err == unix.ENOENT {
		return 0
	}
	require.NoError(t, err)
	return st.Mode & unix.S_IFMT
}
