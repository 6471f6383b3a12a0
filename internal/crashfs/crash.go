package crashfs

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
)

// Mode says which unsynced changes a crash keeps.
type Mode int

const (
	// DropAll keeps nothing that was not made durable: every tracked file
	// holds its durable content and every pending directory operation is
	// undone. It is the zero Mode.
	DropAll Mode = iota
	// KeepPrefix keeps, of each tracked file's unsynced writes, the first i
	// for a random i, and tears the i-th; each pending directory operation
	// survives with probability 1/2.
	KeepPrefix
	// Reorder keeps each unsynced write with probability 1/2, so that a
	// later write may survive an earlier one, and applies the survivors in
	// the order they were made; directory operations as in KeepPrefix.
	Reorder
	// KeepAll keeps everything, as when only the process dies and the page
	// cache reaches the disk: the crash only kills the handles.
	KeepAll
)

func (m Mode) String() string {
	switch m {
	case DropAll:
		return "DropAll"
	case KeepPrefix:
		return "KeepPrefix"
	case Reorder:
		return "Reorder"
	case KeepAll:
		return "KeepAll"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// sectorSize is the unit in which KeepPrefix may tear a write.
const sectorSize = 512

// CrashConfig configures a crash.
type CrashConfig struct {
	Mode Mode
	// Rand draws every random choice; nil means a fixed seed. Given the same
	// workload and seed, a crash leaves the same disk.
	Rand *rand.Rand
	// Mangle, if set, is called once the crash is on disk with the path of
	// each regular file left in each directory that held a file opened for
	// writing through the FS, in lexical order. It is where a test damages
	// what the FS does not model, such as memory-mapped index files. It runs
	// after the FS's lock is released, in the goroutine that crashed it, and
	// must not use this FS, which has crashed.
	Mangle func(path string)
}

// Crash rewrites the disk to a state a real crash at this moment could
// leave, chosen by cfg, then kills the FS: every open File, lock and later
// operation returns ErrCrashed, and the base handles are closed, which
// releases the locks. It returns ErrCrashed if the FS had already crashed.
func (fs *FS) Crash(cfg CrashConfig) error {
	fs.mu.Lock()
	defer fs.unlock()
	if fs.crashed {
		return ErrCrashed
	}
	return fs.crashLocked(cfg)
}

func (fs *FS) crashLocked(cfg CrashConfig) error {
	fs.crashed = true
	rng := cfg.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	c := &crash{
		fs:        fs,
		mode:      cfg.Mode,
		rng:       rng,
		state:     make(map[entry]*node),
		target:    make(map[*node]entry),
		mentioned: make(map[*node]bool),
		real:      make(map[*node]entry),
		reach:     make(map[*node]bool),
		content:   make(map[*node][]byte),
	}
	err := c.run()
	var mangle []string
	if err == nil && cfg.Mangle != nil {
		mangle, err = c.manglePaths()
	}
	fs.closeAll()
	fs.crashErr = err
	if len(mangle) > 0 {
		fs.after = append(fs.after, func() {
			for _, p := range mangle {
				cfg.Mangle(p)
			}
		})
	}
	return err
}

// closeAll closes every base handle and drops the model.
func (fs *FS) closeAll() {
	for h := range fs.handles {
		h.f.Close()
		h.f = nil
	}
	for l := range fs.locks {
		l.c.Close()
		l.c = nil
	}
	for n := range fs.files {
		if n.fd != nil {
			n.fd.Close()
			n.fd = nil
		}
	}
	fs.handles, fs.locks, fs.files, fs.dataDirs = nil, nil, nil, nil
	fs.pending, fs.root = nil, nil
}

// crash computes the state a crash leaves and writes it to disk.
type crash struct {
	fs   *FS
	mode Mode
	rng  *rand.Rand

	// state holds each entry the pending operations touch, as the crash
	// leaves it; target is its inverse for the nodes they mention, which
	// are listed in involved in order of first mention.
	state     map[entry]*node
	target    map[*node]entry
	involved  []*node
	mentioned map[*node]bool

	// real holds where a node is on disk while the crash is written, when
	// that is not where it is live; entry{} means nowhere.
	real    map[*node]entry
	stashes int
	reach   map[*node]bool

	content map[*node][]byte // files to write, and what
	order   []*node          // the keys of content, in the order to write
}

func (c *crash) run() error {
	if err := c.replay(); err != nil {
		return err
	}
	var tracked []*node
	for n := range c.fs.files {
		if n.tracked && c.reachable(n) {
			tracked = append(tracked, n)
		}
	}
	slices.SortFunc(tracked, func(a, b *node) int { return cmp.Compare(a.seq, b.seq) })
	for _, n := range tracked {
		b, err := c.contentOf(n)
		if err != nil {
			return err
		}
		c.setContent(n, b)
	}
	for _, step := range []func() error{c.stash, c.place, c.drop, c.write} {
		if err := step(); err != nil {
			return fmt.Errorf("crashfs: crash: %w", err)
		}
	}
	return nil
}

// replay decides which pending directory operations survive. Each survives
// by chance, and only if every entry it touches is, in the replay, as the
// operation found it: the survivors then form a history the file system
// could have had, and no node ends up in two places.
func (c *crash) replay() error {
	pending := c.fs.pending
	for _, op := range pending {
		for i, k := range op.keys {
			if _, ok := c.state[k]; !ok {
				c.state[k] = op.before[i] // durable
			}
		}
		for _, n := range op.nodes() {
			if !c.mentioned[n] {
				c.mentioned[n] = true
				c.involved = append(c.involved, n)
			}
		}
	}
	for _, op := range pending {
		if !c.survives() {
			continue
		}
		ok := true
		for i, k := range op.keys {
			ok = ok && c.state[k] == op.before[i]
		}
		if ok {
			for i, k := range op.keys {
				c.state[k] = op.after[i]
			}
		}
	}
	for k, n := range c.state {
		if n == nil {
			continue
		}
		if _, dup := c.target[n]; dup {
			return fmt.Errorf("crashfs: crash: %s would be in two places", n.path())
		}
		c.target[n] = k
	}
	return nil
}

func (c *crash) survives() bool {
	switch c.mode {
	case DropAll:
		return false
	case KeepAll:
		return true
	}
	return c.rng.IntN(2) == 0
}

// contentOf returns the content the crash leaves in the tracked file n: it
// reads n back, rolls every unsynced write back to reach the durable
// content, and applies the writes the mode keeps.
func (c *crash) contentOf(n *node) ([]byte, error) {
	b, err := readAll(n.fd)
	if err != nil {
		return nil, err
	}
	ws := n.writes
	for i := len(ws) - 1; i >= 0; i-- {
		b = ws[i].undo(b)
	}
	switch c.mode {
	case KeepAll:
		for i := range ws {
			b = ws[i].redo(b)
		}
	case KeepPrefix:
		k := c.rng.IntN(len(ws) + 1)
		for i := range k {
			if i < k-1 {
				b = ws[i].redo(b)
			} else {
				b = c.tear(b, &ws[i])
			}
		}
	case Reorder:
		for i := range ws {
			if c.rng.IntN(2) == 0 {
				b = ws[i].redo(b)
			}
		}
	}
	return b, nil
}

// tear applies w to b whole, or only a prefix of its bytes, or only some of
// the 512-byte sectors it covers, with the file size reaching the end of w.
// A Truncate is never torn.
func (c *crash) tear(b []byte, w *write) []byte {
	if w.data == nil {
		return w.redo(b)
	}
	switch c.rng.IntN(3) {
	case 0:
		return w.redo(b)
	case 1:
		return writeAt(b, w.data[:c.rng.IntN(len(w.data))], w.off)
	}
	end := w.off + int64(len(w.data))
	b = resize(b, max(int64(len(b)), end))
	for s := w.off; s < end; {
		e := min((s/sectorSize+1)*sectorSize, end)
		if c.rng.IntN(2) == 0 {
			copy(b[s:e], w.data[s-w.off:e-w.off])
		}
		s = e
	}
	return b
}

func (c *crash) setContent(n *node, b []byte) {
	c.content[n] = b
	c.order = append(c.order, n)
}

// where returns where the crash leaves n.
func (c *crash) where(n *node) (entry, bool) {
	if c.mentioned[n] {
		e, ok := c.target[n]
		return e, ok
	}
	return entry{n.parent, n.name}, n.parent != nil
}

// reachable reports whether n is on a path from the root once the crash is
// written: an operation that survives may be inside a directory whose own
// creation or move did not.
func (c *crash) reachable(n *node) bool {
	if n == c.fs.root {
		return true
	}
	if r, ok := c.reach[n]; ok {
		return r
	}
	c.reach[n] = false // renames of nested directories may form a cycle
	e, ok := c.where(n)
	r := ok && c.reachable(e.dir)
	c.reach[n] = r
	return r
}

// depth returns the depth of a reachable node once the crash is written.
func (c *crash) depth(n *node) int {
	if n == c.fs.root {
		return 0
	}
	e, _ := c.where(n)
	return 1 + c.depth(e.dir)
}

// loc returns where n is on disk during the rewrite.
func (c *crash) loc(n *node) (entry, bool) {
	if e, ok := c.real[n]; ok {
		return e, e.dir != nil
	}
	return entry{n.parent, n.name}, n.parent != nil
}

// path returns the path of n on disk during the rewrite; n must be there.
func (c *crash) path(n *node) string {
	if n == c.fs.root {
		return "/"
	}
	e, _ := c.loc(n)
	return filepath.Join(c.path(e.dir), e.name)
}

// stash renames out of the way, within its directory, every node on disk
// that the crash puts elsewhere or nowhere.
func (c *crash) stash() error {
	for _, n := range c.involved {
		live, ok := c.loc(n)
		if !ok {
			c.real[n] = entry{}
			continue
		}
		if t, ok := c.target[n]; ok && t == live {
			continue
		}
		c.stashes++
		s := entry{live.dir, fmt.Sprintf(".crashfs-stash-%d", c.stashes)}
		if err := c.fs.base.Rename(c.path(n), filepath.Join(c.path(s.dir), s.name)); err != nil {
			return err
		}
		c.real[n] = s
	}
	return nil
}

// place puts every reachable node where the crash leaves it, parents first:
// it renames a stashed node into place, makes a directory that was removed,
// and schedules the content of a removed file.
func (c *crash) place() error {
	var todo []*node
	for _, n := range c.involved {
		t, ok := c.target[n]
		if !ok || !c.reachable(n) {
			continue
		}
		if e, ok := c.loc(n); ok && e == t {
			continue
		}
		todo = append(todo, n)
	}
	slices.SortStableFunc(todo, func(a, b *node) int { return cmp.Compare(c.depth(a), c.depth(b)) })
	for _, n := range todo {
		t := c.target[n]
		dst := filepath.Join(c.path(t.dir), t.name)
		_, onDisk := c.loc(n)
		switch {
		case onDisk:
			if err := c.fs.base.Rename(c.path(n), dst); err != nil {
				return err
			}
		case n.dir:
			if err := c.fs.base.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case n.fd == nil:
			return fmt.Errorf("cannot bring back %s: not a regular file", dst)
		case !n.tracked: // a tracked file's content is already set
			b, err := readAll(n.fd)
			if err != nil {
				return err
			}
			c.setContent(n, b)
		}
		c.real[n] = t
	}
	return nil
}

// drop removes what is still stashed.
func (c *crash) drop() error {
	for _, n := range c.involved {
		e, ok := c.real[n]
		if !ok || e.dir == nil {
			continue
		}
		if t, ok := c.target[n]; ok && t == e {
			continue
		}
		if err := c.fs.base.RemoveAll(c.path(n)); err != nil {
			return err
		}
	}
	return nil
}

// write writes the content of every file that has one.
func (c *crash) write() error {
	for _, n := range c.order {
		p := c.path(n)
		f, err := c.fs.base.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteAt(c.content[n], 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// manglePaths lists the files Mangle is called with.
func (c *crash) manglePaths() ([]string, error) {
	var paths []string
	for d := range c.fs.dataDirs {
		if !c.reachable(d) {
			continue
		}
		dir := c.path(d)
		ents, err := c.fs.base.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}
