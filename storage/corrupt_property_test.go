package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/logfs/logfs/record"
)

// TestCorruptionServesNothingWrong builds partitions of small segments,
// reads them through a Reader, both views and lookups by time as a
// reference, corrupts one batch of a sealed segment at random, and checks
// that every read after that either fails with a corruption error or
// returns exactly the reference: nothing wrong is ever served without an
// error, and nothing panics.
//
// Environment: LOGFS_CORRUPT_SEEDS (default 60), LOGFS_CORRUPT_SEED (one
// seed), LOGFS_CORRUPT_KINDS (comma list), LOGFS_CORRUPT_SHOW (failures
// shown). Two kinds are left out by default, as limits of the format that
// docs/durability.md names:
//   - base-larger: a base offset raised within the gap a compacted log may
//     have is only caught at the batch after it, so its records are served
//     with the raised offsets first;
//   - header-flip: lookups by time trust a batch's max timestamp from its
//     header, as Kafka does, without reading the batch to check its CRC.
func TestCorruptionServesNothingWrong(t *testing.T) {
	n := envInt("LOGFS_CORRUPT_SEEDS", 60)
	if testing.Short() {
		n = 10
	}
	first := int64(0)
	if s := os.Getenv("LOGFS_CORRUPT_SEED"); s != "" {
		first, _ = strconv.ParseInt(s, 10, 64)
		n = 1
	}
	kinds := []string{"value-flip", "base-smaller", "base-huge", "length", "count-crcfixed"}
	if s := os.Getenv("LOGFS_CORRUPT_KINDS"); s != "" {
		kinds = strings.Split(s, ",")
	}
	stats := map[string]int{}
	failed := 0
	for seed := first; seed < first+int64(n); seed++ {
		c := &corruptCase{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), kinds: kinds, stats: stats}
		c.run()
		if len(c.problems) > 0 {
			failed++
			if failed <= envInt("LOGFS_CORRUPT_SHOW", 10) {
				t.Errorf("seed %d, %s:\n  %s", seed, c.desc, strings.Join(c.problems[:min(len(c.problems), 5)], "\n  "))
			}
		}
	}
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-50s %d", k, stats[k])
	}
	if failed > 0 {
		t.Errorf("%d of %d seeds failed", failed, n)
	}
}

func envInt(name string, def int) int {
	if s := os.Getenv(name); s != "" {
		if v, err := strconv.Atoi(s); err == nil {
			return v
		}
	}
	return def
}

// corruptCase is one seed: a partition, its reference reads, one
// corruption and the checks after it.
type corruptCase struct {
	t        *testing.T
	seed     int64
	rng      *rand.Rand
	kinds    []string
	stats    map[string]int
	desc     string
	kind     string
	problems []string

	p      *Partition
	recs   []*record.Record // by offset
	render [numFormats][]byte
	starts [numFormats][]int64 // rendered position of each record, and the end
	times  map[int64]record.Offset
	bad    record.Batch // header of the corrupted batch, as it was
}

func (c *corruptCase) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func sameErr(a, b error) bool { return a != nil && b != nil && a.Error() == b.Error() }

// checkErr accepts the errors of bad data: ErrCorrupt and its siblings
// (a length can break the framing in other ways; a base offset lowered
// leaves the offsets between its batch's new last offset and the next
// batch missing, ErrHole), all EIO through fs (IsCorruption).
func (c *corruptCase) checkErr(where string, err error) {
	switch {
	case errors.Is(err, record.ErrCorrupt):
	case errors.Is(err, ErrHole):
		c.stats["ErrHole ("+c.kind+")"]++
	case errors.Is(err, record.ErrTruncated), errors.Is(err, record.ErrUnsupportedMagic), errors.Is(err, record.ErrTooLarge):
		c.stats["error other than ErrCorrupt ("+c.kind+")"]++
	default:
		c.problem("%s: error %v is not one of bad data", where, err)
	}
}

func (c *corruptCase) run() {
	defer func() {
		if r := recover(); r != nil {
			c.problem("panic: %v", r)
		}
	}()
	rng := c.rng
	clk := newClock()
	l, err := Open(c.t.TempDir(), Options{Logger: testLogger(c.t), Now: clk.Now, RetentionCheckInterval: -1})
	if err != nil {
		c.problem("open: %v", err)
		return
	}
	defer l.Close()
	segBytes := []int{2000, 2000, 3000, 6000, 60000}[rng.Intn(5)]
	interval := []int{0, 100, 500, 4096}[rng.Intn(4)]
	top, err := l.CreateTopic("t", 1, small(fmt.Sprintf("segment.bytes=%d", segBytes), fmt.Sprintf("index.interval.bytes=%d", interval)))
	if err != nil {
		c.problem("create: %v", err)
		return
	}
	p, err := top.Partition(0)
	if err != nil {
		c.problem("partition: %v", err)
		return
	}
	c.p = p
	ts := int64(1_700_000_000_000)
	for b := 0; len(p.segments()) < 3+rng.Intn(3) || b < 20; b++ {
		recs := make([]Record, 1+rng.Intn(5))
		for i := range recs {
			ts += int64(rng.Intn(40)) - 5
			if rng.Intn(4) > 0 {
				recs[i].Timestamp = ts // else the clock's
			}
			size := rng.Intn(120)
			if segBytes == 60000 {
				size = rng.Intn(3000)
			}
			v := make([]byte, size)
			for j := range v {
				v[j] = byte('a' + rng.Intn(26))
			}
			if rng.Intn(10) == 0 && size > 0 {
				v[0] = 0xff // not UTF-8: base64 in JSONL
			}
			recs[i].Value = v
			if rng.Intn(3) == 0 {
				recs[i].Key = []byte(fmt.Sprintf("k%d", rng.Intn(100)))
			}
			if rng.Intn(5) == 0 {
				recs[i].Headers = []record.Header{{Key: []byte("h"), Value: []byte("x")}}
			}
		}
		if _, err := p.Append(recs); err != nil {
			c.problem("append: %v", err)
			return
		}
	}
	segs := p.segments()
	end := p.EndOffset()
	if !c.reference(end) {
		return
	}

	// Views and a reader opened, and read from, before the corruption.
	buildJSONL := rng.Intn(4) > 0
	var warm []*View
	var warmFmt []Format
	for f := Format(0); f < numFormats; f++ {
		if f == JSONL && !buildJSONL {
			continue
		}
		v, err := p.NewView(f, 0)
		if err != nil {
			c.problem("view: %v", err)
			return
		}
		defer v.Close()
		if size, err := v.Size(); err != nil || size != int64(len(c.render[f])) {
			c.problem("%v view size %d, %v; want %d", f, size, err, len(c.render[f]))
		}
		buf := make([]byte, 1+rng.Intn(3000))
		for off := int64(0); off < int64(len(c.render[f])) && rng.Intn(4) > 0; {
			k, _ := v.ReadAt(buf, off)
			off += int64(k)
			if k == 0 {
				break
			}
		}
		warm = append(warm, v)
		warmFmt = append(warmFmt, f)
	}
	warmReader, err := p.NewReader(record.Offset(rng.Int63n(int64(end) + 1)))
	if err == nil {
		defer warmReader.Close()
		for range rng.Intn(40) {
			if _, err := warmReader.Next(); err != nil {
				break
			}
		}
	}
	if len(c.problems) > 0 {
		return
	}

	if !c.corrupt(segs, rng.Intn(len(segs)-1)) {
		c.stats["skipped: no applicable corruption"]++
		return
	}
	c.stats["kind: "+c.kind]++

	c.checkReaderFrom0()
	r, err := p.NewReader(0)
	if err != nil {
		c.checkErr("NewReader(0)", err)
	} else {
		defer r.Close()
	}
	for range 25 {
		off := record.Offset(rng.Int63n(int64(end) + 1))
		if rng.Intn(3) == 0 {
			off = min(max(c.bad.BaseOffset+record.Offset(rng.Intn(7))-3, 0), end)
		}
		if r != nil && rng.Intn(2) == 0 {
			c.checkSeek(r, off, r.Seek(off), "Seek")
		} else {
			nr, err := p.NewReader(off)
			c.checkSeek(nr, off, err, "NewReader")
			if nr != nil {
				nr.Close()
			}
		}
	}
	if warmReader != nil {
		c.checkReadOn(warmReader, "warm reader", -1)
	}
	for f := Format(0); f < numFormats; f++ {
		c.checkView(f, 0)
		for range 2 {
			c.checkView(f, record.Offset(rng.Int63n(int64(end)+1)))
		}
	}
	for i, v := range warm {
		c.checkViewReads(v, warmFmt[i], 0, "warm view")
	}
	for tt, want := range c.times {
		got, err := p.OffsetForTime(tt)
		switch {
		case err != nil:
			c.checkErr(fmt.Sprintf("OffsetForTime(%d)", tt), err)
		case got != want && !(c.kind == "base-smaller" && want >= c.bad.BaseOffset && want <= c.bad.LastOffset()):
			// (The exception is the seeks' limit, see checkSeek: a time
			// lookup seeks to the offset the time index gives.)
			c.problem("OffsetForTime(%d) = %d, want %d (no error)", tt, got, want)
		}
	}
}

// reference reads everything before the corruption: records, both
// renderings, and the answers to random lookups by time.
func (c *corruptCase) reference(end record.Offset) bool {
	rng, p := c.rng, c.p
	r, err := p.NewReader(0)
	if err != nil {
		c.problem("reader: %v", err)
		return false
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.problem("reference read: %v", err)
			return false
		}
		cp := *rec
		cp.Key, cp.Value = bytes.Clone(rec.Key), bytes.Clone(rec.Value)
		cp.Headers = nil
		for _, h := range rec.Headers {
			cp.Headers = append(cp.Headers, record.Header{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)})
		}
		c.recs = append(c.recs, &cp)
	}
	if record.Offset(len(c.recs)) != end {
		c.problem("reference has %d records, end %d", len(c.recs), end)
		return false
	}
	for f := Format(0); f < numFormats; f++ {
		var out []byte
		for _, rec := range c.recs {
			c.starts[f] = append(c.starts[f], int64(len(out)))
			out = f.Append(out, rec)
		}
		c.starts[f] = append(c.starts[f], int64(len(out)))
		c.render[f] = out
	}
	lo, hi := c.recs[0].Timestamp, c.recs[0].Timestamp
	for _, rec := range c.recs {
		lo, hi = min(lo, rec.Timestamp), max(hi, rec.Timestamp)
	}
	c.times = map[int64]record.Offset{}
	for range 30 {
		tt := lo - 2 + rng.Int63n(hi-lo+4)
		if rng.Intn(3) == 0 {
			tt = c.recs[rng.Intn(len(c.recs))].Timestamp
		}
		want := end
		for _, rec := range c.recs {
			if rec.Timestamp >= tt {
				want = rec.Offset
				break
			}
		}
		if got, err := p.OffsetForTime(tt); err != nil || got != want {
			c.problem("OffsetForTime(%d) before corruption: %d, %v; want %d", tt, got, err, want)
		}
		c.times[tt] = want
	}
	return len(c.problems) == 0
}

func (c *corruptCase) sameRec(where string, rec *record.Record) bool {
	if rec.Offset < 0 || rec.Offset >= record.Offset(len(c.recs)) {
		c.problem("%s: offset %d out of the log", where, rec.Offset)
		return false
	}
	ref := c.recs[rec.Offset]
	if bytes.Equal(ref.Value, rec.Value) && ref.Timestamp == rec.Timestamp && bytes.Equal(ref.Key, rec.Key) {
		return true
	}
	c.problem("%s: offset %d has value %.20q, want %.20q (corrupt batch at offsets %d-%d, position %d)",
		where, rec.Offset, rec.Value, ref.Value, c.bad.BaseOffset, c.bad.LastOffset(), c.bad.Pos)
	return false
}

func (c *corruptCase) checkReaderFrom0() {
	r, err := c.p.NewReader(0)
	if err != nil {
		c.checkErr("NewReader(0)", err)
		return
	}
	defer r.Close()
	want := record.Offset(0)
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			c.problem("reader from 0: read to the end (%d records) with no error", want)
			return
		}
		if err != nil {
			c.checkErr("reader from 0", err)
			if _, again := r.Next(); !sameErr(again, err) {
				c.problem("reader from 0: next call after %v returned %v", err, again)
			}
			return
		}
		if rec.Offset != want {
			c.problem("reader from 0: offset %d, want %d", rec.Offset, want)
			return
		}
		if !c.sameRec("reader from 0", rec) {
			return
		}
		want = rec.Offset + 1
	}
}

func (c *corruptCase) checkSeek(r *Reader, off record.Offset, err error, how string) {
	where := fmt.Sprintf("%s(%d)", how, off)
	if err != nil {
		c.checkErr(where, err)
		return
	}
	if c.kind == "base-smaller" && off >= c.bad.BaseOffset && off <= c.bad.LastOffset() {
		// The one limit left to seeks: the walk from the index entry
		// at the bad batch knows no more of its base offset than that
		// it is past the entry before (index.Span.From), so a base
		// lowered no further than that is not seen, and the seek lands
		// after the batch. Reading on from before it catches it.
		c.checkReadOn(r, where, -1)
		return
	}
	c.checkReadOn(r, where, off)
}

// checkReadOn reads up to 30 records from r, which should give first on
// (any offset when first is -1).
func (c *corruptCase) checkReadOn(r *Reader, where string, first record.Offset) {
	expect := first
	for range 30 {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			if expect >= 0 && expect < record.Offset(len(c.recs)) {
				c.problem("%s: EOF at offset %d, before the end %d", where, expect, len(c.recs))
			}
			return
		}
		if err != nil {
			c.checkErr(where, err)
			if _, again := r.Next(); !sameErr(again, err) {
				c.problem("%s: next call after %v returned %v", where, err, again)
			}
			return
		}
		if expect >= 0 && rec.Offset != expect {
			c.problem("%s: offset %d, want %d", where, rec.Offset, expect)
			return
		}
		if !c.sameRec(where, rec) {
			return
		}
		expect = rec.Offset + 1
	}
}

func (c *corruptCase) checkView(f Format, start record.Offset) {
	v, err := c.p.NewView(f, start)
	if err != nil {
		c.checkErr(fmt.Sprintf("%v NewView(%d)", f, start), err)
		return
	}
	defer v.Close()
	c.checkViewReads(v, f, start, fmt.Sprintf("%v view from %d", f, start))
}

// checkViewReads reads v sequentially and at random, in sizes from 1 byte
// to 300 KiB: every byte must be the reference's at the same place.
func (c *corruptCase) checkViewReads(v *View, f Format, start record.Offset, where string) {
	rng := c.rng
	ref := c.render[f][c.starts[f][start]:]
	if sz, err := v.Size(); err != nil {
		c.problem("%s: Size failed: %v", where, err) // it stops at bad bytes instead
		return
	} else if sz > int64(len(ref)) {
		c.problem("%s: Size %d, past the reference's %d", where, sz, len(ref))
		return
	}
	size := func() int {
		switch rng.Intn(4) {
		case 0:
			return 1 + rng.Intn(16)
		case 1:
			return 1 + rng.Intn(4096)
		case 2:
			return 4096
		}
		return 1 + rng.Intn(300<<10)
	}
	mismatch := errors.New("mismatch")
	read := func(off int64, n int) (int, error) {
		buf := make([]byte, n)
		k, err := v.ReadAt(buf, off)
		if k < 0 || k > n || off+int64(k) > int64(len(ref)) {
			c.problem("%s: ReadAt(%d bytes at %d) returned %d of %d", where, n, off, k, len(ref))
			return 0, mismatch
		}
		if !bytes.Equal(buf[:k], ref[off:off+int64(k)]) {
			i := 0
			for i < k && buf[i] == ref[off+int64(i)] {
				i++
			}
			c.problem("%s: ReadAt(%d bytes at %d) differs at %d (bad batch offsets %d-%d)", where, n, off, off+int64(i), c.bad.BaseOffset, c.bad.LastOffset())
			return k, mismatch
		}
		switch {
		case err == nil && k < n && off+int64(k) < int64(len(ref)):
			// The view stops at bad bytes: its size says so by now, and
			// the read there fails with them.
			end := off + int64(k)
			if sz, serr := v.Size(); serr != nil || sz != end {
				c.problem("%s: ReadAt(%d bytes at %d) short (%d) with no error, before the end %d (size %d, %v)", where, n, off, k, len(ref), sz, serr)
			} else if _, err := v.ReadAt(make([]byte, 1), end); err == nil || errors.Is(err, io.EOF) {
				c.problem("%s: the view stops at %d, before the end %d, and a read there gets %v", where, end, len(ref), err)
			} else {
				c.checkErr(where+" at the stop", err)
			}
		case errors.Is(err, io.EOF) && off+int64(k) < int64(len(ref)):
			c.problem("%s: ReadAt(%d bytes at %d) EOF after %d bytes, before the end %d", where, n, off, k, len(ref))
		case err != nil && !errors.Is(err, io.EOF):
			c.checkErr(where, err)
		}
		return k, err
	}
	off, errs := int64(0), 0
	for off < int64(len(ref)) && len(c.problems) == 0 {
		k, err := read(off, size())
		off += int64(k)
		if err == mismatch {
			return
		}
		if err != nil {
			if errs++; errs > 3 {
				break
			}
		}
	}
	for range 25 {
		if len(c.problems) > 0 {
			return
		}
		off := rng.Int63n(int64(len(ref)) + 1)
		k, err := read(off, size())
		if err == nil && rng.Intn(2) == 0 {
			read(off+int64(k), size())
		}
	}
}

// corrupt applies one corruption of a random kind to a batch of
// segs[segIndex], and reports whether it changed anything.
func (c *corruptCase) corrupt(segs []*segment, segIndex int) bool {
	rng := c.rng
	seg := segs[segIndex]
	var batches []record.Batch
	sc := record.NewScanner(seg.log, 0, record.Position(seg.size.Load()), record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		batches = append(batches, *sc.Batch())
	}
	if sc.Err() != nil || len(batches) == 0 {
		return false
	}
	bi := rng.Intn(len(batches))
	switch rng.Intn(4) {
	case 0:
		bi = 0
	case 1:
		bi = len(batches) - 1
	}
	c.bad = batches[bi]
	c.kind = c.kinds[rng.Intn(len(c.kinds))]
	pos, size := int64(c.bad.Pos), c.bad.Size()
	f, err := os.OpenFile(seg.logPath(), os.O_RDWR, 0)
	if err != nil {
		c.problem("open log: %v", err)
		return false
	}
	defer f.Close()
	raw := make([]byte, size)
	if _, err := f.ReadAt(raw, pos); err != nil {
		c.problem("read batch: %v", err)
		return false
	}
	orig := bytes.Clone(raw)
	var detail string
	switch c.kind {
	case "value-flip":
		for range 1 + rng.Intn(3) {
			raw[record.HeaderSize+rng.Intn(int(size)-record.HeaderSize)] ^= byte(1 + rng.Intn(255))
		}
	case "header-flip":
		i := 21 + rng.Intn(record.HeaderSize-21)
		raw[i] ^= byte(1 + rng.Intn(255))
		detail = fmt.Sprintf(" byte %d", i)
	case "base-smaller":
		if c.bad.BaseOffset == 0 {
			return false
		}
		nb := uint64(rng.Int63n(int64(c.bad.BaseOffset)))
		if rng.Intn(2) == 0 {
			nb = uint64(c.bad.BaseOffset) - 1
		}
		binary.BigEndian.PutUint64(raw, nb)
		detail = fmt.Sprintf(" to %d", nb)
	case "base-larger":
		nb := uint64(c.bad.BaseOffset) + 1 + uint64(rng.Intn(20))
		if rng.Intn(3) == 0 {
			nb = uint64(c.bad.BaseOffset) + 1 + uint64(rng.Intn(1<<20))
		}
		binary.BigEndian.PutUint64(raw, nb)
		detail = fmt.Sprintf(" to %d", nb)
	case "base-huge":
		nb := uint64(1)<<31 + uint64(rng.Int63n(1<<40))
		switch rng.Intn(3) {
		case 0:
			nb = uint64(rng.Int63()) | 1<<62
		case 1:
			nb = uint64(rng.Int63()) | 1<<63
		}
		binary.BigEndian.PutUint64(raw, nb)
		detail = fmt.Sprintf(" to %d", int64(nb))
	case "length":
		old := int32(binary.BigEndian.Uint32(raw[8:]))
		var nl int32
		switch rng.Intn(5) {
		case 0:
			nl = old - 1 - int32(rng.Intn(int(old)))
		case 1:
			nl = old + 1 + int32(rng.Intn(200))
		case 2:
			nl = -1 - int32(rng.Intn(1000))
		case 3:
			nl = math.MaxInt32 - int32(rng.Intn(1000))
		default:
			nl = int32(rng.Uint32())
		}
		if nl == old {
			nl++
		}
		binary.BigEndian.PutUint32(raw[8:], uint32(nl))
		detail = fmt.Sprintf(" %d to %d", old, nl)
	case "count-crcfixed":
		cnt := int32(binary.BigEndian.Uint32(raw[57:]))
		nc := cnt + 1
		if rng.Intn(2) == 0 && cnt > 1 {
			nc = cnt - 1
		}
		binary.BigEndian.PutUint32(raw[57:], uint32(nc))
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
		detail = fmt.Sprintf(" %d to %d", cnt, nc)
	}
	if bytes.Equal(raw, orig) {
		return false
	}
	if _, err := f.WriteAt(raw, pos); err != nil {
		c.problem("write batch: %v", err)
		return false
	}
	c.desc = fmt.Sprintf("%s%s: segment %d of %d (base %d), batch %d of %d (offsets %d-%d, position %d)",
		c.kind, detail, segIndex, len(segs), seg.base, bi, len(batches), c.bad.BaseOffset, c.bad.LastOffset(), c.bad.Pos)
	return true
}
