package storage

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/layout"
)

// syncBuffer is a log sink safe for the recovery threads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// plantedTree reads every file below dir, links unfollowed.
func plantedTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		st, err := os.Lstat(p)
		require.NoError(t, err)
		switch {
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[p] = fmt.Sprintf("%v %s", st.Mode(), b)
		default:
			out[p] = st.Mode().String()
		}
		return nil
	}))
	return out
}

// TestPlantedEntriesAreLeftAlone plants a symbolic link (or a FIFO) where
// each kind of file and folder of a data directory belongs, pointing out
// of it, and checks that open, recovery, check, check --repair, appends,
// retention and topic delete never touch what it points to, never hang,
// and report it by name (issue 14, point 1).
func TestPlantedEntriesAreLeftAlone(t *testing.T) {
	seg0 := "00000000000000000000"
	kinds := []struct {
		name    string
		path    string // below the data directory
		dir     bool   // points to a folder
		fifo    bool
		replace bool // the planted entry replaces the file that was there
	}{
		{name: "new .log", path: "t-0/00000000000000000500.log"},
		{name: "first .log", path: "t-0/" + seg0 + ".log", replace: true},
		{name: "active .log", path: "t-0/active.log", replace: true},
		{name: ".index", path: "t-0/" + seg0 + ".index", replace: true},
		{name: ".timeindex", path: "t-0/" + seg0 + ".timeindex", replace: true},
		{name: ".txnindex", path: "t-0/" + seg0 + ".txnindex"},
		{name: ".viewindex", path: "t-0/" + seg0 + ".viewindex", replace: true},
		{name: "recovery point checkpoint", path: layout.RecoveryPointFile, replace: true},
		{name: "log start checkpoint", path: layout.LogStartFile, replace: true},
		{name: "clean shutdown marker", path: layout.CleanShutdownFile, replace: true},
		{name: "topic settings", path: "t" + layout.TopicConfigSuffix, replace: true},
		{name: "new topic settings", path: "u" + layout.TopicConfigSuffix},
		{name: "partition folder", path: "t-1", dir: true, replace: true},
		{name: "new partition folder", path: "u-0", dir: true},
		{name: "folder in a partition", path: "t-0/sub", dir: true},
		{name: ".lock", path: layout.LockFile, replace: true},
		{name: "meta.properties", path: "meta.properties"},
		{name: "FIFO .log", path: "t-0/00000000000000000500.log", fifo: true},
		{name: "FIFO .index", path: "t-0/" + seg0 + ".index", fifo: true, replace: true},
		{name: "FIFO checkpoint", path: layout.RecoveryPointFile, fifo: true, replace: true},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel() // each in its own folder; mostly waiting on fsync
			base := t.TempDir()
			dir := filepath.Join(base, "data")
			clk := newClock()
			l, err := Open(dir, Options{Logger: testLogger(t), Now: clk.Now, RetentionCheckInterval: -1})
			require.NoError(t, err)
			top, err := l.CreateTopic("t", 2, small("segment.bytes=400", "retention.ms=60000", "file.delete.delay.ms=0"))
			require.NoError(t, err)
			for id := 0; id < 2; id++ {
				p, _ := top.Partition(id)
				for i := 0; i < 20; i++ {
					_, err := p.Append(values(1, fmt.Sprintf("v%02d", i)))
					require.NoError(t, err)
				}
			}
			p0, _ := top.Partition(0)
			bases := p0.SegmentBases()
			require.Greater(t, len(bases), 2)
			v, err := p0.NewView(Values, 0)
			require.NoError(t, err)
			_, err = v.Size()
			require.NoError(t, err)
			v.Close()
			require.NoError(t, l.Close())

			path := k.path
			if path == "t-0/active.log" {
				path = filepath.Join("t-0", layout.SegmentFileName(bases[len(bases)-1], layout.LogSuffix))
			}
			planted := filepath.Join(dir, path)
			outside := filepath.Join(base, "outside")
			require.NoError(t, os.MkdirAll(outside, 0o700))
			target := filepath.Join(outside, "precious")
			if k.dir {
				// A folder that looks like a partition, to tempt recovery.
				target = outside
				require.NoError(t, os.WriteFile(filepath.Join(outside, seg0+".log"), []byte("precious bytes"), 0o600))
				require.NoError(t, os.WriteFile(filepath.Join(outside, seg0+".index"), []byte("precious index"), 0o600))
			} else {
				require.NoError(t, os.WriteFile(target, []byte("precious bytes"), 0o600))
			}
			if k.replace {
				require.NoError(t, os.RemoveAll(planted))
			} else {
				_, err := os.Lstat(planted)
				require.ErrorIs(t, err, os.ErrNotExist)
			}
			if k.fifo {
				require.NoError(t, unix.Mkfifo(planted, 0o600))
			} else {
				require.NoError(t, os.Symlink(target, planted))
			}
			want := plantedTree(t, outside)
			untouched := func(step string) {
				t.Helper()
				require.Equal(t, want, plantedTree(t, outside), "after %s", step)
				st, err := os.Lstat(planted)
				if err == nil && !st.Mode().IsRegular() && !st.IsDir() {
					return // left alone
				}
				// Only a file logfs writes from scratch may take the name
				// back, and retention and topic delete may remove a
				// partition's entries (unlinking them).
				if !strings.Contains(step, "delete") && !strings.Contains(step, "retention") {
					require.NoError(t, err, "after %s: the planted entry is not removed", step)
					require.True(t, st.Mode().IsRegular(), "after %s: %v", step, st.Mode())
					require.True(t, strings.Contains(path, ".index") || strings.Contains(path, ".timeindex") ||
						strings.Contains(path, "checkpoint") || strings.Contains(path, ".props") ||
						strings.Contains(path, ".viewindex") || strings.Contains(path, ".txnindex") || strings.Contains(path, ".log") ||
						path == layout.CleanShutdownFile, // written at each clean close; a link there vouches for nothing
						"after %s: only files written from scratch replace a planted entry, not %s", step, path)
				}
			}
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			// Unclean, so that recovery scans: the marker goes.
			if k.path != layout.CleanShutdownFile {
				require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
			}

			step := func(name string, o Options, use func(l *Log)) {
				t.Helper()
				o.Logger, o.Now, o.RetentionCheckInterval = logger, clk.Now, -1
				done := make(chan error, 1)
				go func() {
					l, err := Open(dir, o)
					if err == nil {
						if use != nil {
							use(l)
						}
						_ = l.Close()
					}
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						require.Contains(t, err.Error(), planted, "%s: an open that fails names the planted entry", name)
					}
				case <-time.After(time.Minute):
					t.Fatalf("%s hangs", name)
				}
				untouched(name)
			}
			step("read-only open and check", Options{ReadOnly: true}, func(l *Log) {
				_ = l.Check()
				if p, err := l.Partition("t", 0); err == nil {
					readAllLoose(p)
				}
			})
			step("check --repair", Options{ForceRecovery: true}, nil)
			step("open, recovery, append", Options{}, func(l *Log) {
				p, err := l.Partition("t", 0)
				if err == nil {
					for i := 0; i < 30; i++ {
						_, _ = p.Append(values(1, fmt.Sprintf("new%02d", i)))
					}
					readAllLoose(p)
				}
				_ = l.Check()
			})
			step("retention", Options{}, func(l *Log) {
				clk.Advance(time.Hour)
				_, _ = l.EnforceRetention()
			})
			step("topic delete", Options{}, func(l *Log) { _ = l.DeleteTopic("t") })
			require.Contains(t, logs.String(), planted, "the planted entry is reported by name")
		})
	}
}

// readAllLoose reads what it can, errors included.
func readAllLoose(p *Partition) {
	r, err := p.NewReader(p.StartOffset())
	if err != nil {
		return
	}
	defer r.Close()
	for i := 0; i < 1000; i++ {
		if _, err := r.Next(); err != nil {
			return
		}
	}
}
