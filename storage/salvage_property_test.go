package storage

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// TestRandomDamageRepair is the property test of issue 12: random damage
// to every kind of file of a cleanly closed partition (.log bytes,
// truncations and extensions, both indexes, view indexes, checkpoints,
// stray, renamed and copied segments). For each: nothing panics; no read
// serves a wrong record without an error, before or after the repair;
// check names damage to the log (a line of the recovery report or a Check
// error); the repair keeps every record that is not in the damaged bytes;
// and the next append gets an offset no record has. CI runs a few seeds;
// LOGFS_DAMAGE_SEEDS=N runs N.
func TestRandomDamageRepair(t *testing.T) {
	seeds := envInt("LOGFS_DAMAGE_SEEDS", 4)
	const n = 400
	template := t.TempDir()
	pdirT, _ := buildSalvage(t, template, n)
	// Give some segments a view index, as reads of record files make.
	l, err := Open(template, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	p, err := l.Partition("t", 0)
	require.NoError(t, err)
	v, err := p.NewView(JSONL, 0)
	require.NoError(t, err)
	_, err = readView(t, v, 1<<16)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	require.NoError(t, l.Close())
	_ = pdirT

	kinds := map[string]int{}
	for seed := 1; seed <= seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		dir := t.TempDir()
		copyTree(t, template, dir)
		pdir := filepath.Join(dir, "t-0")
		d := damageOnce(t, rng, dir, pdir)
		kinds[d.kind]++
		what := fmt.Sprintf("seed %d: %s", seed, d.what)
		checkDamaged(t, dir, n, d, what)
	}
	t.Logf("%d seeds: %v", seeds, kinds)
}

// damage is what damageOnce did.
type damage struct {
	kind, what string
	lost       func(record.Offset) bool // records the damage may take
	logDamage  bool                     // check must name it
}

// segmentBatches lists the batches of a .log: base, next offset, start and
// end position.
type batchSpan struct {
	base, next record.Offset
	from, to   record.Position
}

func segmentBatches(t *testing.T, path string) []batchSpan {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	var out []batchSpan
	sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		b := sc.Batch()
		out = append(out, batchSpan{b.BaseOffset, b.NextOffset(), b.Pos, sc.Pos()})
	}
	require.NoError(t, sc.Err())
	return out
}

func damageOnce(t *testing.T, rng *rand.Rand, dir, pdir string) damage {
	t.Helper()
	ents, err := os.ReadDir(pdir)
	require.NoError(t, err)
	var bases []record.Offset
	for _, e := range ents {
		if b, suf, ok := layout.ParseSegmentFileName(e.Name()); ok && suf == layout.LogSuffix {
			bases = append(bases, b)
		}
	}
	none := func(record.Offset) bool { return false }
	i := rng.Intn(len(bases))
	base := bases[i]
	logPath := layout.SegmentPath(pdir, base, layout.LogSuffix)
	batches := segmentBatches(t, logPath)
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	write := func(p string, b []byte) { require.NoError(t, os.WriteFile(p, b, 0o644)) }
	inBatches := func(pick []batchSpan) func(record.Offset) bool {
		return func(o record.Offset) bool {
			for _, b := range pick {
				if o >= b.base && o < b.next {
					return true
				}
			}
			return false
		}
	}
	switch k := rng.Intn(9); k {
	case 0: // flip bytes of one batch: not its base offset or leader epoch, which no CRC covers (documented)
		if len(batches) == 0 {
			break
		}
		b := batches[rng.Intn(len(batches))]
		pos := int(b.from) + 16 + rng.Intn(int(b.to-b.from)-16)
		for j := 0; j < 1+rng.Intn(3) && pos+j < int(b.to); j++ {
			data[pos+j] ^= byte(1 + rng.Intn(255))
		}
		write(logPath, data)
		return damage{"flip", fmt.Sprintf("bytes flipped at %d of %s", pos, filepath.Base(logPath)), inBatches([]batchSpan{b}), true}
	case 1: // truncate
		if len(data) == 0 {
			break
		}
		at := rng.Intn(len(data))
		write(logPath, data[:at])
		var cut []batchSpan
		for _, b := range batches {
			if b.to > record.Position(at) {
				cut = append(cut, b)
			}
		}
		return damage{"truncate", fmt.Sprintf("%s truncated to %d", filepath.Base(logPath), at), inBatches(cut), len(cut) > 0 || at < len(data)}
	case 2: // extend with garbage or zeros
		ext := make([]byte, 1+rng.Intn(3000))
		if rng.Intn(2) == 0 {
			rng.Read(ext)
		}
		write(logPath, append(data, ext...))
		return damage{"extend", fmt.Sprintf("%s extended by %d bytes", filepath.Base(logPath), len(ext)), none, true}
	case 3, 4: // an index file: flipped, truncated, zeroed or emptied
		suf := []string{layout.IndexSuffix, layout.TimeIndexSuffix, layout.ViewIndexSuffix}[rng.Intn(3)]
		p := layout.SegmentPath(pdir, base, suf)
		idx, err := os.ReadFile(p)
		if err != nil || len(idx) == 0 {
			break
		}
		switch rng.Intn(4) {
		case 0:
			idx[rng.Intn(len(idx))] ^= byte(1 + rng.Intn(255))
		case 1:
			idx = idx[:rng.Intn(len(idx))]
		case 2:
			idx = make([]byte, len(idx))
		case 3:
			idx = nil
		}
		write(p, idx)
		return damage{"index", "damaged " + filepath.Base(p), none, false}
	case 5: // a checkpoint
		name := []string{layout.RecoveryPointFile, layout.LogStartFile}[rng.Intn(2)]
		p := filepath.Join(dir, name)
		ck, err := os.ReadFile(p)
		if err != nil {
			break
		}
		if rng.Intn(2) == 0 && len(ck) > 0 {
			ck = ck[:rng.Intn(len(ck))]
		} else {
			ck = append(ck, []byte("garbage\n")...)
		}
		write(p, ck)
		return damage{"checkpoint", "damaged " + name, none, false}
	case 6: // a stray garbage .log
		junk := make([]byte, 100+rng.Intn(4000))
		rng.Read(junk)
		name := bases[rng.Intn(len(bases))] + record.Offset(1+rng.Intn(30))
		p := layout.SegmentPath(pdir, name, layout.LogSuffix)
		if _, err := os.Stat(p); err == nil {
			break
		}
		write(p, junk)
		return damage{"stray", "garbage " + filepath.Base(p), none, true}
	case 7: // a sealed segment renamed
		if i == len(bases)-1 {
			break
		}
		to := base + record.Offset(1+rng.Intn(int(bases[i+1]-base)-1+1))
		if to == bases[i+1] {
			to = bases[i+1] - 1
		}
		if to <= base {
			break
		}
		for _, suf := range []string{layout.LogSuffix, layout.IndexSuffix, layout.TimeIndexSuffix} {
			os.Rename(layout.SegmentPath(pdir, base, suf), layout.SegmentPath(pdir, to, suf))
		}
		os.Remove(layout.SegmentPath(pdir, base, layout.ViewIndexSuffix))
		return damage{"rename", fmt.Sprintf("%s renamed to base %d", filepath.Base(logPath), to), inBatches(batches), true}
	case 8: // a copy under a higher name, past the end
		p := layout.SegmentPath(pdir, 10_000+record.Offset(rng.Intn(1000)), layout.LogSuffix)
		write(p, data)
		return damage{"copy", fmt.Sprintf("%s copied to %s", filepath.Base(logPath), filepath.Base(p)), none, len(data) > 0}
	}
	return damage{"none", "nothing damaged", none, false}
}

// checkDamaged checks the promises on a damaged directory.
func checkDamaged(t *testing.T, dir string, n int, d damage, what string) {
	t.Helper()
	// check: read-only, forced. Nothing wrong is served.
	ro, err := Open(dir, Options{ReadOnly: true, ForceRecovery: true, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err, what)
	p, err := ro.Partition("t", 0)
	require.NoError(t, err, what)
	got, _ := readEverything(t, p)
	requireRightValues(t, got, what+" (read-only)")
	checkErr := ro.Check()
	if d.logDamage {
		require.True(t, len(p.Recovery().Lines) > 0 || checkErr != nil, "%s: check names the damage", what)
	}
	require.NoError(t, ro.Close())

	// check --repair.
	l, err := Open(dir, Options{ForceRecovery: true, Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err, what)
	p, err = l.Partition("t", 0)
	require.NoError(t, err, what)
	got, _ = readEverything(t, p)
	requireRightValues(t, got, what+" (repaired)")
	var missing []record.Offset
	for off := record.Offset(0); off < record.Offset(n); off++ {
		if _, ok := got[off]; !ok && !d.lost(off) {
			missing = append(missing, off)
		}
	}
	require.Empty(t, missing, "%s: records not in the damaged bytes lost by the repair (report: %v)", what, p.Recovery().Lines)
	highest := record.Offset(-1)
	for off := range got {
		highest = max(highest, off)
	}
	off, err := p.Append([]Record{{Value: []byte("after")}})
	require.NoError(t, err, what)
	require.Greater(t, off, highest, "%s: an offset handed out twice", what)
	require.NoError(t, l.Close())
	ents, err := os.ReadDir(filepath.Join(dir, "t-0"))
	require.NoError(t, err)
	for _, e := range ents {
		require.False(t, bytes.HasSuffix([]byte(e.Name()), []byte(".tmp")), "%s: %s left behind", what, e.Name())
	}
}

func requireRightValues(t *testing.T, got map[record.Offset]string, what string) {
	t.Helper()
	for off, v := range got {
		require.Equal(t, salvageValue(int(off)), v, "%s: offset %d served wrong", what, off)
	}
}

// copyTree copies a directory tree of regular files.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, info.Mode())
	}))
}
