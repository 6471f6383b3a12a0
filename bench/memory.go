package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// The memory phase's data directory: topic mem of memPartitions
// partitions, every segment one batch of memBatch records of memRecordSize
// bytes.
const (
	memTopic      = "mem"
	memPartitions = 10
	memRecordSize = 100
	memBatch      = 8 // one batch a segment: segment.bytes below two batches
)

// mountRequest is the mount's largest read request and the st_blksize
// that tools read by: fs.DefaultMaxWrite, which the mount started by the
// benchmark uses. (Package bench does not import fs: bench/peers, a nested
// module, imports bench and should not need go-fuse.)
const mountRequest = 1 << 20

// memory builds a data directory of Options.Segments segments, mounts it
// and records the mount process's memory after mounting, after ls -R and
// after a few reads, and which segments it has mapped an index of.
func (r *runner) memory(ctx context.Context) (err error) {
	o := &r.o
	work := filepath.Join(r.root, "memory")
	dataDir := filepath.Join(work, "data")
	defer func() { err = errors.Join(err, RemoveSynced(work)) }()
	mem := &Memory{Segments: o.Segments, Partitions: memPartitions}
	r.rep.Memory = mem
	p := newPayload(memRecordSize, o.Seed)
	perPart := o.Segments / memPartitions
	mem.Segments = perPart * memPartitions

	// Build: one batch per segment.
	t := time.Now()
	l, err := openStorage(dataDir)
	if err != nil {
		return err
	}
	bv := newBatchValues(memRecordSize, memBatch)
	batchBytes := int64(record.HeaderSize + memBatch*(memRecordSize+16))
	top, err := l.CreateTopic(memTopic, memPartitions, storage.Overrides{"segment.bytes": batchBytes + batchBytes/2, "flush.ms": -1, "retention.ms": -1})
	if err != nil {
		return errors.Join(err, l.Close())
	}
	for _, part := range top.Partitions() {
		for s := range perPart {
			if err := ctx.Err(); err != nil {
				return errors.Join(err, l.Close())
			}
			_, recs := bv.prepare(p, int64(s*memBatch), memBatch)
			if _, err := part.Append(recs); err != nil {
				return errors.Join(err, l.Close())
			}
		}
		if got := len(part.SegmentBases()); got != perPart {
			return errors.Join(fmt.Errorf("partition %d has %d segments, want %d (one batch each)", part.ID(), got, perPart), l.Close())
		}
	}
	if err := l.Close(); err != nil {
		return err
	}
	mem.BuildS = time.Since(t).Seconds()
	r.logf("memory: built %d segments in %d partitions in %.1fs", mem.Segments, memPartitions, mem.BuildS)

	mp := filepath.Join(work, "mnt")
	m, err := r.startMount(ctx, dataDir, mp, "retention.ms=-1")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.stop()) }()
	pid := m.cmd.Process.Pid
	step := func(name string) error {
		st, err := procMemory(pid, dataDir)
		if err != nil {
			return err
		}
		st.Step = name
		mem.Steps = append(mem.Steps, st)
		r.logf("memory: %-28s rss %s, peak %s, %d maps, %d of segment files (%d segments)", name, sizeCell(st.RSS), sizeCell(st.HWM), st.Maps, st.FileMaps, st.SegsMapped)
		return nil
	}
	if err := step("mounted"); err != nil {
		return err
	}
	var lsOut countWriter
	if _, err := runTool(ctx, &lsOut, "ls", "-R", mp); err != nil {
		return err
	}
	for i := range memPartitions {
		ents, err := os.ReadDir(filepath.Join(mp, memTopic, strconv.Itoa(i), "offset"))
		if err != nil {
			return err
		}
		mem.Verified++
		if len(ents) != perPart+2 {
			mem.Wrong++
			mem.WrongExample = fmt.Sprintf("offset/ of partition %d lists %d names, want %d segments + earliest, latest", i, len(ents), perPart)
		}
	}
	if err := step("after ls -R"); err != nil {
		return err
	}

	// Reads: head -n 1 at three segment bases and tail -n 10 in partitions
	// 0-2; all of partition 3 with cat. A tool reads a whole request at a
	// time, up to st_blksize (the mount's largest request) past where it
	// starts, whatever it prints: head -n 1 reads that much after its
	// offset, tail that much before the end at most. Those records count as
	// read.
	read := map[string]bool{} // "partition/base" of every segment read
	segOf := func(part int, off int64) string {
		return fmt.Sprintf("%d/%d", part, off/memBatch*memBatch)
	}
	window := int64(mountRequest / (memRecordSize + 1)) // records in one request
	rng := rand.New(rand.NewPCG(o.Seed, 99))
	n := int64(perPart * memBatch)
	check := func(what string, w *expectWriter, err error) error {
		if err != nil {
			return err
		}
		mem.Verified++
		if werr := w.done(); werr != nil && mem.Wrong == 0 {
			mem.WrongExample = what + ": " + werr.Error()
		}
		if w.err != nil {
			mem.Wrong++
		}
		return nil
	}
	for part := range 3 {
		dir := filepath.Join(mp, memTopic, strconv.Itoa(part), "offset")
		for range 3 {
			base := rng.Int64N(int64(perPart)) * memBatch
			w := newExpectWriter(p, base, base+1)
			_, err := runTool(ctx, w, "head", "-n", "1", filepath.Join(dir, strconv.FormatInt(base, 10)))
			if err := check("head", w, err); err != nil {
				return err
			}
			for off := base; off < min(base+window, n); off++ {
				read[segOf(part, off)] = true
			}
		}
		w := newExpectWriter(p, n-10, n)
		_, err := runTool(ctx, w, "tail", "-n", "10", filepath.Join(dir, "0"))
		if err := check("tail", w, err); err != nil {
			return err
		}
		for off := max(n-window, 0); off < n; off++ {
			read[segOf(part, off)] = true
		}
	}
	w := newExpectWriter(p, 0, n)
	_, err = runTool(ctx, w, "cat", filepath.Join(mp, memTopic, "3", "offset", "0"))
	if err := check("cat", w, err); err != nil {
		return err
	}
	for off := int64(0); off < n; off += memBatch {
		read[segOf(3, off)] = true
	}
	if err := step("after reads"); err != nil {
		return err
	}
	mem.SegmentsRead = len(read)
	mapped, err := mappedSegments(pid, dataDir)
	if err != nil {
		return err
	}
	mem.Mapped = len(mapped)
	for _, s := range mapped {
		if !read[s] {
			mem.MappedUnread++
			if len(mem.Unread) < 5 {
				mem.Unread = append(mem.Unread, s)
			}
		}
	}
	mem.PeakRSS = mem.Steps[len(mem.Steps)-1].HWM
	return nil
}

// procMemory reads VmRSS and VmHWM of a process and counts its memory
// mappings, and those of the segment files under dataDir.
func procMemory(pid int, dataDir string) (MemoryStep, error) {
	var st MemoryStep
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			st.RSS = kb << 10
		case "VmHWM":
			st.HWM = kb << 10
		}
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return st, err
	}
	segs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(maps)), "\n") {
		st.Maps++
		if s, ok := mappedSegmentFile(line, dataDir); ok {
			st.FileMaps++
			segs[s] = true
		}
	}
	st.SegsMapped = len(segs)
	return st, nil
}

// mappedSegments lists "partition/base" of every segment of the memory
// data set with a mapped file.
func mappedSegments(pid int, dataDir string) ([]string, error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	segs := map[string]bool{}
	for _, line := range strings.Split(string(maps), "\n") {
		if s, ok := mappedSegmentFile(line, dataDir); ok {
			segs[s] = true
		}
	}
	out := make([]string, 0, len(segs))
	for s := range segs {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

// mappedSegmentFile parses a /proc/PID/maps line of a segment file (the
// .log, read through a mapping once looked up in, or an index) of
// dataDir/mem-P/ into "P/base".
func mappedSegmentFile(line, dataDir string) (string, bool) {
	i := strings.Index(line, dataDir+"/")
	if i < 0 {
		return "", false
	}
	path := strings.TrimSuffix(line[i:], " (deleted)")
	base, suffix, ok := layout.ParseSegmentFileName(filepath.Base(path))
	if !ok || suffix != layout.LogSuffix && suffix != layout.IndexSuffix && suffix != layout.TimeIndexSuffix {
		return "", false
	}
	t, part, ok := layout.ParsePartitionDirName(filepath.Base(filepath.Dir(path)))
	if !ok || t != memTopic {
		return "", false
	}
	return fmt.Sprintf("%d/%d", part, base), true
}
