package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// exchange swaps the entries a and b below root atomically (renameat2
// RENAME_EXCHANGE), resolving their folders without following a link, so
// that the attacker itself never reaches outside root.
func exchange(rootfd int, a, b string) error {
	parent := func(rel string) (int, string, error) {
		dir, base := filepath.Split(rel)
		if dir == "" {
			fd, err := unix.Dup(rootfd)
			return fd, base, err
		}
		fd, err := unix.Openat2(rootfd, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
		return fd, base, err
	}
	afd, abase, err := parent(a)
	if err != nil {
		return err
	}
	defer unix.Close(afd)
	bfd, bbase, err := parent(b)
	if err != nil {
		return err
	}
	defer unix.Close(bfd)
	return unix.Renameat2(afd, abase, bfd, bbase, unix.RENAME_EXCHANGE)
}

// swapper is a hostile user: while armed, it exchanges each pair of
// entries below root in a tight loop. pause returns once no exchange is
// under way, so that the test can reset the tree and check the sentinel.
type swapper struct {
	mu     sync.Mutex
	cond   *sync.Cond
	armed  bool
	stop   bool
	rootfd int
	pairs  [][2]string
	swaps  atomic.Int64 // exchanges made
	passes atomic.Int64 // rounds of exchanges tried
	done   chan struct{}
}

func startSwapper(t *testing.T, root string, pairs ...[2]string) *swapper {
	t.Helper()
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	// RENAME_EXCHANGE needs the file system's support (ext4, xfs, tmpfs,
	// btrfs have it).
	require.NoError(t, unix.Mkdirat(rootfd, "xa", 0o700))
	require.NoError(t, unix.Symlinkat("xa", rootfd, "xb"))
	if err := exchange(rootfd, "xa", "xb"); err != nil {
		unix.Close(rootfd)
		t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
	}
	require.NoError(t, unix.Unlinkat(rootfd, "xa", 0))
	require.NoError(t, unix.Unlinkat(rootfd, "xb", unix.AT_REMOVEDIR))
	s := &swapper{rootfd: rootfd, pairs: pairs, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go func() {
		defer close(s.done)
		s.mu.Lock()
		defer s.mu.Unlock()
		for {
			for !s.armed && !s.stop {
				s.cond.Wait()
			}
			if s.stop {
				return
			}
			for _, p := range s.pairs {
				if exchange(s.rootfd, p[0], p[1]) == nil {
					s.swaps.Add(1)
				}
			}
			s.passes.Add(1)
			// Let pause in between two rounds of exchanges.
			s.mu.Unlock()
			s.mu.Lock()
		}
	}()
	t.Cleanup(func() {
		s.mu.Lock()
		s.stop = true
		s.cond.Broadcast()
		s.mu.Unlock()
		<-s.done
		unix.Close(rootfd)
	})
	return s
}

func (s *swapper) arm() {
	s.mu.Lock()
	s.armed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

func (s *swapper) pause() {
	s.mu.Lock()
	s.armed = false
	s.mu.Unlock()
}

// raceRounds runs rounds of an attack: reset makes the tree (the swapper
// paused), attack runs while the swapper exchanges, and after each round
// the sentinel is checked. Each round attacks until the attacker has
// tried a round of exchanges, so that it surely ran; bounded by rounds and
// a deadline.
func raceRounds(t *testing.T, e *advEnv, s *swapper, reset func(), attack func()) {
	t.Helper()
	const rounds = 150
	deadline := time.Now().Add(1500 * time.Millisecond)
	for i := 0; i < rounds && time.Now().Before(deadline); i++ {
		s.pause()
		reset()
		e.untouched(t, "reset")
		before := s.passes.Load()
		s.arm()
		attack()
		for s.passes.Load() == before && time.Now().Before(deadline) {
			attack()
		}
		s.pause()
		e.untouched(t, "an attack")
	}
	require.Positive(t, s.swaps.Load(), "the attacker ran")
	t.Logf("%d exchanges", s.swaps.Load())
}

// resetRoot empties root (os.RemoveAll removes links as entries) and
// makes the files and folders of spec in it: a name ending in "/" is a
// folder, "name -> target" a link, "name |" a FIFO, "name = outside" a
// hard link to a file outside, anything else a file of its own name.
func resetRoot(t *testing.T, e *advEnv, spec ...string) {
	t.Helper()
	es, err := os.ReadDir(e.root)
	require.NoError(t, err)
	for _, d := range es {
		require.NoError(t, os.RemoveAll(filepath.Join(e.root, d.Name())))
	}
	for _, sp := range spec {
		switch {
		case strings.HasSuffix(sp, "/"):
			require.NoError(t, os.MkdirAll(filepath.Join(e.root, sp), 0o700))
		case strings.Contains(sp, " -> "):
			name, target, _ := strings.Cut(sp, " -> ")
			require.NoError(t, os.Symlink(target, filepath.Join(e.root, name)))
		case strings.HasSuffix(sp, " |"):
			require.NoError(t, unix.Mkfifo(filepath.Join(e.root, strings.TrimSuffix(sp, " |")), 0o666))
		case strings.Contains(sp, " = "):
			name, target, _ := strings.Cut(sp, " = ")
			require.NoError(t, os.Link(filepath.Join(e.out, target), filepath.Join(e.root, name)))
		default:
			require.NoError(t, os.WriteFile(filepath.Join(e.root, sp), []byte("ours "+sp), 0o600))
		}
	}
}

// TestAdv35RaceRemoveAllDescent swaps folders of a partition for links out
// of the root while RemoveAll descends through them.
func TestAdv35RaceRemoveAllDescent(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		s := startSwapper(t, e.root, [2]string{"t-0/sub", "l1"}, [2]string{"t-0/sub/deeper", "l2"}, [2]string{"t-0", "l3"},
			[2]string{"t-0/sub/a", "l4"})
		raceRounds(t, e, s, func() {
			resetRoot(t, e, "t-0/sub/deeper/", "t-0/sub/a", "t-0/sub/b", "t-0/sub/deeper/c", "t-0/00000000000000000000.log",
				"l1 -> "+e.out, "l2 -> "+filepath.Join(e.out, "sub"), "l3 -> "+filepath.Join(e.out, "t-0"),
				"l4 -> "+filepath.Join(e.out, "precious"))
		}, func() {
			_ = e.fs.RemoveAll(filepath.Join(e.root, "t-0", "sub"))
			_ = e.fs.RemoveAll(filepath.Join(e.root, "t-0"))
		})
	})
}

// TestAdv35RaceRename swaps the folders on both sides of a rename for
// links out of the root.
func TestAdv35RaceRename(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		s := startSwapper(t, e.root, [2]string{"q", "l1"}, [2]string{"p", "l2"})
		raceRounds(t, e, s, func() {
			resetRoot(t, e, "p/", "q/", "p/a", "l1 -> "+e.out, "l2 -> "+e.out)
		}, func() {
			for i := 0; i < 10; i++ {
				// Through l1, this would replace outside/precious.
				_ = e.fs.Rename(filepath.Join(e.root, "p", "a"), filepath.Join(e.root, "q", "precious"))
				_ = e.fs.Rename(filepath.Join(e.root, "q", "precious"), filepath.Join(e.root, "p", "a"))
				// Through l2, this would take outside/0.log in.
				_ = e.fs.Rename(filepath.Join(e.root, "p", "0.log"), filepath.Join(e.root, "stolen"))
			}
		})
	})
}

// TestAdv35RaceCreateTruncate swaps a planted link (and the folder holding
// it) back and forth while a file is written from scratch at its name.
func TestAdv35RaceCreateTruncate(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		s := startSwapper(t, e.root, [2]string{"p/x", "p/y"}, [2]string{"p/z", "p/y"}, [2]string{"p", "l1"})
		raceRounds(t, e, s, func() {
			resetRoot(t, e, "p/", "p/y", "p/x -> "+filepath.Join(e.out, "precious"), "p/z |", "l1 -> "+e.out)
		}, func() {
			for _, name := range []string{"x", "z", "precious", "0.log", "new"} {
				f, err := e.fs.OpenFile(filepath.Join(e.root, "p", name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
				if err == nil {
					_, err = f.WriteAt([]byte("new"), 0)
					require.NoError(t, err)
					require.NoError(t, f.Close())
				}
			}
			_ = WriteFileAtomic(e.fs, filepath.Join(e.root, "p", "precious"), []byte("new"))
		})
	})
}

// TestAdv35RaceHardLink swaps a hard link to a file outside with a file of
// ours between the check of its links and the truncate.
func TestAdv35RaceHardLink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		s := startSwapper(t, e.root, [2]string{"p/h", "p/own"})
		raceRounds(t, e, s, func() {
			resetRoot(t, e, "p/", "p/own", "p/h = precious")
		}, func() {
			for i := 0; i < 5; i++ {
				for _, flag := range []int{os.O_RDWR | os.O_TRUNC, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREATE | os.O_TRUNC} {
					f, err := e.fs.OpenFile(filepath.Join(e.root, "p", "h"), flag, 0o600)
					if err == nil {
						_, err = f.WriteAt([]byte("new"), 0)
						if flag&os.O_APPEND != 0 {
							_, err = f.(osFile).Write([]byte("new"))
						}
						require.NoError(t, err)
						require.NoError(t, f.Truncate(1))
						require.NoError(t, f.Close())
					}
				}
			}
		})
	})
}

// TestAdv35RaceLock swaps .lock for a link out of the root, a FIFO and a
// dangling link while it is locked: the lock is never taken on a file
// outside, nothing is made outside, and it never hangs.
func TestAdv35RaceLock(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		s := startSwapper(t, e.root, [2]string{".lock", "l1"}, [2]string{".lock", "f"}, [2]string{".lock", "d"},
			[2]string{"p", "l2"})
		precious := filepath.Join(e.out, "precious")
		raceRounds(t, e, s, func() {
			resetRoot(t, e, "p/", ".lock", "l1 -> "+precious, "f |", "d -> "+filepath.Join(e.base, "nowhere"), "l2 -> "+e.out)
		}, func() {
			for _, name := range []string{".lock", filepath.Join("p", "precious"), filepath.Join("p", "nowhere")} {
				l, err := e.fs.Lock(filepath.Join(e.root, name))
				if err != nil {
					continue
				}
				// Not locked by us: a lock of our own on another open
				// file would conflict (flock and OFD locks are per open
				// file).
				f, err := os.Open(precious)
				require.NoError(t, err)
				require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB), "the lock is never on a file outside")
				lk := unix.Flock_t{Type: unix.F_RDLCK}
				require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk), "the lock is never on a file outside")
				require.NoError(t, f.Close())
				require.NoError(t, l.Close())
			}
		})
	})
}

// TestAdv35RaceFolderSwappedForALink swaps a partition folder for a link
// out of the root while every method works in it. The folder holds no
// "precious": whatever reaches one went outside.
func TestAdv35RaceFolderSwappedForALink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		e := newAdvEnv(t)
		s := startSwapper(t, e.root, [2]string{"p", "l1"}, [2]string{"p/sub", "l2"})
		p := filepath.Join(e.root, "p")
		var symlinks atomic.Int64
		count := func(err error) {
			if errors.Is(err, ErrSymlink) {
				symlinks.Add(1)
			}
		}
		raceRounds(t, e, s, func() {
			resetRoot(t, e, "p/sub/", "p/0.log", "l1 -> "+e.out, "l2 -> "+filepath.Join(e.out, "sub"))
		}, func() {
			for i := 0; i < 5; i++ {
				for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_TRUNC} {
					for _, name := range []string{"precious", "sub/deep"} {
						f, err := e.fs.OpenFile(filepath.Join(p, name), flag, 0)
						if err == nil {
							f.Close()
						}
						require.Error(t, err, "%s is outside", name)
						count(err)
					}
				}
				_, err := e.fs.Stat(filepath.Join(p, "precious"))
				require.Error(t, err)
				count(err)
				_, err = e.fs.Stat(filepath.Join(p, "sub", "deep"))
				require.Error(t, err)
				require.Error(t, e.fs.Remove(filepath.Join(p, "precious")))
				require.Error(t, e.fs.Remove(filepath.Join(p, "sub", "deep")))
				for _, dir := range []string{p, filepath.Join(p, "sub")} {
					es, err := e.fs.ReadDir(dir)
					count(err)
					for _, d := range es {
						require.Contains(t, []string{"0.log", "sub", "new", "made"}, d.Name(), "a listing of %s", dir)
					}
					_ = e.fs.SyncDir(dir)
				}
				_ = e.fs.MkdirAll(filepath.Join(p, "sub", "new"), 0o700)
				f, err := e.fs.OpenFile(filepath.Join(p, "made"), os.O_RDWR|os.O_CREATE, 0o600)
				if err == nil {
					f.Close()
				}
			}
		})
		t.Logf("%d operations met the link", symlinks.Load())
	})
}
