package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/tmpfs"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// fullDiskTopic is a topic that rolls and indexes often, so that a small
// disk fills at every kind of write: the log, both indexes, new segments,
// view indexes.
var fullDiskTopic = small("segment.bytes=65536", "index.interval.bytes=512", "segment.index.bytes=4096",
	"max.message.bytes=20000", "flush.ms=-1")

// fillAppends appends writes of random sizes until one fails, requiring
// that it fails with ENOSPC and leaves the log as it was, and returns the
// values appended, by offset from start.
func fillAppends(t *testing.T, p *Partition, rng *rand.Rand, model []string, what string) []string {
	t.Helper()
	for w := 0; ; w++ {
		n := 1 + rng.IntN(50)
		recs := make([]Record, n)
		vals := make([]string, n)
		for i := range recs {
			vals[i] = fmt.Sprintf("%s-%d-%d-%s", what, w, i, strings.Repeat("v", rng.IntN(2000)))
			recs[i] = Record{Value: []byte(vals[i])}
		}
		end := p.EndOffset()
		_, err := p.Append(recs)
		if err == nil {
			model = append(model, vals...)
			continue
		}
		require.ErrorIs(t, err, syscall.ENOSPC, "%s", what)
		require.NotErrorIs(t, err, ErrFailed, "%s: the append was undone", what)
		require.Equal(t, end, p.EndOffset(), "%s", what)
		requireValues(t, p, model, what)
		return model
	}
}

// requireValues requires the partition to hold exactly vals from offset 0.
func requireValues(t *testing.T, p *Partition, vals []string, what string) {
	t.Helper()
	got := readAll(t, p, 0)
	require.Len(t, got, len(vals), "%s", what)
	for i, g := range got {
		require.Equal(t, strconv.Itoa(i)+":"+vals[i], g, "%s: record %d", what, i)
	}
}

// TestFullTmpfs fills a real tmpfs at many levels, from outside, while a
// log appends to it: each append that finds no room fails with ENOSPC and
// leaves nothing, reads go on, appends resume once room is freed, and a
// close on a full disk leaves a directory that the next start recovers
// with every acknowledged record.
func TestFullTmpfs(t *testing.T) {
	root := tmpfs.Mount(t, 4<<20)
	rng := rand.New(rand.NewPCG(7, 7))
	for level := 0; level < 12; level++ {
		what := fmt.Sprintf("level %d", level)
		dir := filepath.Join(root, "data")
		l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		require.NoError(t, err, "%s", what)
		top, err := l.CreateTopic("t", 1, fullDiskTopic)
		require.NoError(t, err, "%s", what)
		p, _ := top.Partition(0)
		// Leave from a few hundred bytes to about a megabyte of room.
		room := int64(300) << (level % 12)
		tmpfs.Reserve(t, root, "filler", max(tmpfs.Free(t, root)-room, 0))
		model := fillAppends(t, p, rng, nil, what)

		// Reads work on a full disk; so do Sync and retention, or they
		// fail with ENOSPC.
		requireValues(t, p, model, what)
		if err := p.Sync(); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "%s", what)
		}

		// Room again: appends go on where they stopped.
		require.NoError(t, os.Remove(filepath.Join(root, "filler")))
		first, err := p.Append(values(3, "after"))
		require.NoError(t, err, "%s", what)
		require.Equal(t, record.Offset(len(model)), first, "%s", what)
		model = append(model, "after-0", "after-1", "after-2")

		// Full again, and closed on the full disk: the close may fail,
		// never crash, and the next start has every record.
		tmpfs.Fill(t, root, "filler")
		model = fillAppends(t, p, rng, model, what+" again")
		if err := l.Close(); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "%s: close", what)
		}
		l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "%s: open on a full disk", what)
			require.NoError(t, os.Remove(filepath.Join(root, "filler")))
			l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err, "%s: reopen", what)
		} else {
			require.NoError(t, os.Remove(filepath.Join(root, "filler")))
		}
		p, err = l.Partition("t", 0)
		require.NoError(t, err)
		requireValues(t, p, model, what+": after reopen")
		require.NoError(t, l.Check(), "%s", what)
		require.NoError(t, l.Close())
		require.NoError(t, os.RemoveAll(dir))
	}
}

// TestRecoveryOnFullTmpfs: recovery and check on a full disk report, never
// crash, and once there is room recover everything.
func TestRecoveryOnFullTmpfs(t *testing.T) {
	root := tmpfs.Mount(t, 4<<20)
	dir := filepath.Join(root, "data")
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, err := l.CreateTopic("t", 2, fullDiskTopic)
	require.NoError(t, err)
	var model [2][]string
	for i := 0; i < 400; i++ {
		p, _ := top.Partition(i % 2)
		v := fmt.Sprintf("r%d-%s", i, strings.Repeat("w", i*7%1500))
		_, err := p.Append([]Record{{Value: []byte(v)}})
		require.NoError(t, err)
		model[i%2] = append(model[i%2], v)
	}
	require.NoError(t, l.Close())
	// An unclean start whose recovery must write: no clean-shutdown
	// marker, no index files.
	require.NoError(t, os.Remove(filepath.Join(dir, layout.CleanShutdownFile)))
	for _, pd := range []string{"t-0", "t-1"} {
		ents, err := os.ReadDir(filepath.Join(dir, pd))
		require.NoError(t, err)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), layout.IndexSuffix) || strings.HasSuffix(e.Name(), layout.TimeIndexSuffix) {
				require.NoError(t, os.Remove(filepath.Join(dir, pd, e.Name())))
			}
		}
	}
	tmpfs.Fill(t, root, "filler")

	for _, o := range []Options{
		{ReadOnly: true, ForceRecovery: true}, // logfs check
		{ForceRecovery: true},                 // logfs check --repair
		{},                                    // a start
	} {
		o.Logger, o.RetentionCheckInterval = testLogger(t), -1
		l, err := Open(dir, o)
		t.Logf("open %+v on a full disk: %v", o, err)
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, "%+v", o)
			continue
		}
		require.NoError(t, l.Check(), "%+v", o)
		if cerr := l.Close(); cerr != nil {
			require.ErrorIs(t, cerr, syscall.ENOSPC, "%+v", o)
		}
	}

	require.NoError(t, os.Remove(filepath.Join(root, "filler")))
	l, err = Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	for i := range model {
		p, err := l.Partition("t", i)
		require.NoError(t, err)
		requireValues(t, p, model[i], fmt.Sprintf("partition %d", i))
	}
	require.NoError(t, l.Check())
	require.NoError(t, l.Close())
	require.False(t, errors.Is(err, ErrFailed))
}
