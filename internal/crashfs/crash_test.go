package crashfs_test

import (
	"bytes"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/crashfs"
	"github.com/logfs/logfs/vfs"
)

const seeds = 100

// tree renders the files and directories under dir in lexical order:
// "a/" for a directory, "a/f=content" for a file.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var parts []string
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			parts = append(parts, rel+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		parts = append(parts, rel+"="+string(b))
		return err
	})
	require.NoError(t, err)
	return strings.Join(parts, " ")
}

// makeTree creates the tree spec renders as tree does, directly on disk.
func makeTree(t *testing.T, dir, spec string) {
	t.Helper()
	for _, e := range strings.Fields(spec) {
		if name, ok := strings.CutSuffix(e, "/"); ok {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
			continue
		}
		name, content, _ := strings.Cut(e, "=")
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
}

// writeSynced creates or replaces name through fs, writes data and syncs
// it, without syncing the directory.
func writeSynced(t *testing.T, fs vfs.FS, name, data string) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(data), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

type dirCase struct {
	setup string // the durable tree before the workload
	run   func(t *testing.T, fs vfs.FS, dir string)
	// states lists every tree a crash may leave in KeepPrefix and Reorder
	// mode, starting with the one DropAll leaves; the last is the live tree,
	// which KeepAll leaves.
	states []string
}

func TestCrashDirectories(t *testing.T) {
	j := filepath.Join
	cases := map[string]dirCase{
		"create without SyncDir": {
			run:    func(t *testing.T, fs vfs.FS, d string) { writeSynced(t, fs, j(d, "f"), "x") },
			states: []string{"", "f=x"},
		},
		"create with SyncDir": {
			run: func(t *testing.T, fs vfs.FS, d string) {
				writeSynced(t, fs, j(d, "f"), "x")
				require.NoError(t, fs.SyncDir(d))
			},
			states: []string{"f=x"},
		},
		"create then rename without SyncDir": {
			run: func(t *testing.T, fs vfs.FS, d string) {
				writeSynced(t, fs, j(d, "tmp"), "x")
				require.NoError(t, fs.Rename(j(d, "tmp"), j(d, "f")))
			},
			states: []string{"", "tmp=x", "f=x"},
		},
		"rename over a file without SyncDir": {
			setup: "cp=old",
			run: func(t *testing.T, fs vfs.FS, d string) {
				writeSynced(t, fs, j(d, "cp.tmp"), "new")
				require.NoError(t, fs.Rename(j(d, "cp.tmp"), j(d, "cp")))
			},
			states: []string{"cp=old", "cp=old cp.tmp=new", "cp=new"},
		},
		"WriteFileAtomic": {
			setup: "cp=old",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, vfs.WriteFileAtomic(fs, j(d, "cp"), []byte("new")))
			},
			states: []string{"cp=new"},
		},
		"rename twice": {
			setup: "a=1",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.Rename(j(d, "a"), j(d, "b")))
				require.NoError(t, fs.Rename(j(d, "b"), j(d, "c")))
			},
			states: []string{"a=1", "b=1", "c=1"},
		},
		"rename a directory": {
			setup: "a/ a/f=1",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.Rename(j(d, "a"), j(d, "b")))
			},
			states: []string{"a/ a/f=1", "b/ b/f=1"},
		},
		"rename across directories": {
			setup: "a/ a/f=1 b/",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.Rename(j(d, "a", "f"), j(d, "b", "g")))
			},
			states: []string{"a/ a/f=1 b/", "a/ b/ b/g=1"},
		},
		"rename across directories, target synced": {
			setup: "a/ a/f=1 b/",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.Rename(j(d, "a", "f"), j(d, "b", "g")))
				require.NoError(t, fs.SyncDir(j(d, "b")))
			},
			states: []string{"a/ b/ b/g=1"},
		},
		"SyncDir makes what a rename depends on durable": {
			setup: "sub/",
			run: func(t *testing.T, fs vfs.FS, d string) {
				writeSynced(t, fs, j(d, "a"), "x")
				require.NoError(t, fs.Rename(j(d, "a"), j(d, "sub", "b")))
				require.NoError(t, fs.SyncDir(j(d, "sub")))
			},
			states: []string{"sub/ sub/b=x"},
		},
		"remove without SyncDir": {
			setup: "f=data g=keep",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.Remove(j(d, "f")))
			},
			states: []string{"f=data g=keep", "g=keep"},
		},
		"remove with SyncDir": {
			setup: "f=data",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.Remove(j(d, "f")))
				require.NoError(t, fs.SyncDir(d))
			},
			states: []string{""},
		},
		"remove and create again": {
			setup: "f=old",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.Remove(j(d, "f")))
				writeSynced(t, fs, j(d, "f"), "new")
			},
			states: []string{"f=old", "", "f=new"},
		},
		"RemoveAll without SyncDir": {
			setup: "t/ t/s/ t/s/y=2 t/x=1",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.RemoveAll(j(d, "t")))
			},
			states: []string{
				"t/ t/s/ t/s/y=2 t/x=1",
				"t/ t/s/ t/s/y=2", "t/ t/s/ t/x=1", "t/ t/s/", "t/ t/x=1", "t/",
				"",
			},
		},
		"RemoveAll with SyncDir of the parent only": {
			setup: "t/ t/x=1",
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.RemoveAll(j(d, "t")))
				require.NoError(t, fs.SyncDir(d))
			},
			states: []string{""},
		},
		"new directory, parent not synced": {
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.MkdirAll(j(d, "a", "b"), 0o755))
				writeSynced(t, fs, j(d, "a", "b", "f"), "x")
				require.NoError(t, fs.SyncDir(j(d, "a", "b")))
				require.NoError(t, fs.SyncDir(j(d, "a")))
			},
			states: []string{"", "a/ a/b/ a/b/f=x"},
		},
		"new directory, all synced": {
			run: func(t *testing.T, fs vfs.FS, d string) {
				require.NoError(t, fs.MkdirAll(j(d, "a", "b"), 0o755))
				writeSynced(t, fs, j(d, "a", "b", "f"), "x")
				require.NoError(t, fs.SyncDir(j(d, "a", "b")))
				require.NoError(t, fs.SyncDir(j(d, "a")))
				require.NoError(t, fs.SyncDir(d))
			},
			states: []string{"a/ a/b/ a/b/f=x"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run := func(mode crashfs.Mode, seed uint64) string {
				d := t.TempDir()
				makeTree(t, d, tc.setup)
				fs := crashfs.New(vfs.Default)
				tc.run(t, fs, d)
				require.NoError(t, fs.Check())
				require.NoError(t, fs.Crash(crashfs.CrashConfig{Mode: mode, Rand: rand.New(rand.NewPCG(seed, 1))}))
				return tree(t, d)
			}
			require.Equal(t, tc.states[0], run(crashfs.DropAll, 0), "DropAll")
			require.Equal(t, tc.states[len(tc.states)-1], run(crashfs.KeepAll, 0), "KeepAll")
			for _, mode := range []crashfs.Mode{crashfs.KeepPrefix, crashfs.Reorder} {
				seen := make(map[string]bool)
				for seed := range uint64(seeds) {
					got := run(mode, seed)
					require.Contains(t, tc.states, got, "%v seed %d", mode, seed)
					seen[got] = true
				}
				for _, s := range tc.states {
					require.True(t, seen[s], "%v never left %q", mode, s)
				}
			}
		})
	}
}

// fileStep is a step of a workload on one file.
type fileStep struct {
	op   string // write, truncate, sync, reopen (with O_TRUNC)
	off  int64
	data []byte
	size int64
}

func wr(off int64, b byte, n int) fileStep {
	return fileStep{op: "write", off: off, data: bytes.Repeat([]byte{b}, n)}
}

// apply is the test's own model of a write.
func (s fileStep) apply(b []byte) []byte {
	b = slices.Clone(b)
	switch s.op {
	case "write":
		if end := int(s.off) + len(s.data); end > len(b) {
			b = append(b, make([]byte, end-len(b))...)
		}
		copy(b[s.off:], s.data)
	case "truncate", "reopen":
		size := int(s.size)
		if s.op == "reopen" {
			size = 0
		}
		if size <= len(b) {
			return b[:size]
		}
		b = append(b, make([]byte, size-len(b))...)
	}
	return b
}

func applyAll(b []byte, ws []fileStep) []byte {
	for _, w := range ws {
		b = w.apply(b)
	}
	return b
}

// torn reports whether got can be base with w torn: a prefix of w's bytes
// or some of its sectors, each byte new or old (zero past the old end).
func torn(base []byte, w fileStep, got []byte) bool {
	if w.op != "write" {
		return false
	}
	full := w.apply(base)
	if len(got) < len(base) || len(got) > max(len(base), len(full)) {
		return false
	}
	for i := range got {
		old := byte(0)
		if i < len(base) {
			old = base[i]
		}
		if got[i] != full[i] && got[i] != old {
			return false
		}
	}
	return true
}

// allowedContent reports whether mode may leave got in a file whose durable
// content is durable and whose unsynced writes are ws.
func allowedContent(mode crashfs.Mode, durable []byte, ws []fileStep, got []byte) bool {
	switch mode {
	case crashfs.DropAll:
		return bytes.Equal(got, durable)
	case crashfs.KeepAll:
		return bytes.Equal(got, applyAll(durable, ws))
	case crashfs.KeepPrefix:
		for i := 0; i <= len(ws); i++ {
			base := applyAll(durable, ws[:i])
			if bytes.Equal(got, base) || i < len(ws) && torn(base, ws[i], got) {
				return true
			}
		}
	case crashfs.Reorder:
		for mask := range 1 << len(ws) {
			b := durable
			for i, w := range ws {
				if mask&(1<<i) != 0 {
					b = w.apply(b)
				}
			}
			if bytes.Equal(got, b) {
				return true
			}
		}
	}
	return false
}

func TestCrashFileContent(t *testing.T) {
	cases := map[string][]fileStep{
		"appends":    {wr(0, 'a', 4), {op: "sync"}, wr(4, 'b', 4), wr(8, 'c', 4), wr(12, 'd', 4)},
		"overwrites": {wr(0, 'a', 8), {op: "sync"}, wr(2, 'b', 2), wr(4, 'c', 6), wr(1, 'd', 1)},
		"truncate and append": {
			wr(0, 'a', 1000), {op: "sync"}, {op: "truncate", size: 100}, wr(100, 'b', 50),
			{op: "truncate", size: 120}, {op: "truncate", size: 130},
		},
		"sectors":          {wr(0, 'a', 300), {op: "sync"}, wr(300, 'b', 1500), wr(1800, 'c', 100)},
		"two syncs":        {wr(0, 'a', 10), {op: "sync"}, wr(10, 'b', 10), {op: "sync"}, wr(20, 'c', 10)},
		"nothing unsynced": {wr(0, 'a', 10), {op: "sync"}},
		"O_TRUNC":          {wr(0, 'a', 10), {op: "sync"}, {op: "reopen"}, wr(0, 'b', 4)},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var durable []byte
			var ws []fileStep
			for _, s := range steps {
				switch s.op {
				case "sync":
					durable, ws = applyAll(durable, ws), nil
				default:
					ws = append(ws, s)
				}
			}
			run := func(mode crashfs.Mode, seed uint64) []byte {
				d := t.TempDir()
				p := filepath.Join(d, "log")
				require.NoError(t, os.WriteFile(p, nil, 0o644))
				fs := crashfs.New(vfs.Default)
				f, err := fs.OpenFile(p, os.O_RDWR, 0)
				require.NoError(t, err)
				for _, s := range steps {
					switch s.op {
					case "write":
						_, err = f.WriteAt(s.data, s.off)
					case "truncate":
						err = f.Truncate(s.size)
					case "sync":
						err = f.Sync()
					case "reopen":
						require.NoError(t, f.Close())
						f, err = fs.OpenFile(p, os.O_RDWR|os.O_TRUNC, 0)
					}
					require.NoError(t, err)
				}
				require.NoError(t, fs.Check())
				require.NoError(t, fs.Crash(crashfs.CrashConfig{Mode: mode, Rand: rand.New(rand.NewPCG(seed, 2))}))
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				return b
			}
			for _, mode := range []crashfs.Mode{crashfs.DropAll, crashfs.KeepAll, crashfs.KeepPrefix, crashfs.Reorder} {
				seen := make(map[string]bool)
				for seed := range uint64(seeds) {
					got := run(mode, seed)
					require.True(t, allowedContent(mode, durable, ws, got), "%v seed %d left %q", mode, seed, got)
					seen[string(got)] = true
					if mode == crashfs.DropAll || mode == crashfs.KeepAll {
						break // no randomness
					}
				}
				if mode == crashfs.KeepPrefix || mode == crashfs.Reorder {
					require.True(t, seen[string(durable)], "%v never left the durable content", mode)
					require.True(t, seen[string(applyAll(durable, ws))], "%v never kept every write", mode)
					if len(ws) > 1 {
						require.Greater(t, len(seen), 2, "%v left only the extremes", mode)
					}
				}
			}
		})
	}
}

// TestCrashTearsSectors checks that KeepPrefix leaves a write with holes,
// which is the torn tail recovery must recognize.
func TestCrashTearsSectors(t *testing.T) {
	var holes bool
	for seed := uint64(0); seed < seeds && !holes; seed++ {
		d := t.TempDir()
		p := filepath.Join(d, "log")
		require.NoError(t, os.WriteFile(p, nil, 0o644))
		fs := crashfs.New(vfs.Default)
		f, err := fs.OpenFile(p, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(bytes.Repeat([]byte{'x'}, 4*512), 0)
		require.NoError(t, err)
		require.NoError(t, fs.Crash(crashfs.CrashConfig{Mode: crashfs.KeepPrefix, Rand: rand.New(rand.NewPCG(seed, 3))}))
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		if len(b) == 4*512 && bytes.Contains(b, []byte{'x'}) && bytes.Contains(b, []byte{0}) {
			holes = true
			for s := 0; s < len(b); s += 512 { // sector-sized holes only
				sec := b[s : s+512]
				require.True(t, bytes.Count(sec, []byte{'x'}) == 512 || bytes.Count(sec, []byte{0}) == 512, "sector %d torn inside", s/512)
			}
		}
	}
	require.True(t, holes, "no seed tore the write into sectors")
}
