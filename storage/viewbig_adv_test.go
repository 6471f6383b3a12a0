package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/broker"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/vfs"
)

// advSteps is n, or a tenth of it under the race detector (CI runs the
// package there; the plain run walks all of it).
func advSteps(n int) int {
	if raceEnabled {
		return max(n/10, 1)
	}
	return n
}

// advSeed is seed, moved by $LOGFS_ADV_SEED (to search with other seeds).
func advSeed(seed int64) int64 {
	n, _ := strconv.ParseInt(os.Getenv("LOGFS_ADV_SEED"), 10, 64)
	return seed + n
}

// advValues makes the records of one batch: big ones (markable) with
// records of every kind of length (empty, null, longer than a window),
// small ones otherwise.
func advValues(rng *rand.Rand, i int, big bool) []Record {
	n := 1 + rng.Intn(4)
	if big {
		n = 200 + rng.Intn(600)
	}
	recs := make([]Record, n)
	for j := range recs {
		var v []byte
		switch k := rng.Intn(60); {
		case k == 0:
			v = nil // null: an empty line
		case k == 1:
			v = []byte{}
		case k == 2 && big:
			v = bytes.Repeat([]byte{'L'}, innerWindow+rng.Intn(2*innerWindow)) // longer than a window
		default:
			v = []byte(fmt.Sprintf("%d-%d-%s", i, j, strings.Repeat(string(rune('a'+rng.Intn(26))), rng.Intn(400))))
		}
		recs[j] = Record{Value: v, Key: []byte(fmt.Sprint(i, j))}
	}
	return recs
}

// advPositions returns interesting places in want: each record's start,
// its '\n', and a byte either side.
func advPositions(want []byte) []int64 {
	var ps []int64
	for at := 0; at < len(want); at++ {
		if want[at] == '\n' {
			ps = append(ps, int64(at), int64(at)+1, int64(at)-1, int64(at)+2)
		}
	}
	return ps
}

// advWalk reads want through views in turns, at random and interesting
// places and sizes, carrying on from where a view (this one or another)
// stopped, dropping marks now and then, and checks every byte.
func advWalk(t *testing.T, p *Partition, views []*View, want []byte, rng *rand.Rand, steps int, what string) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	ps := advPositions(want)
	ends := make([]int64, len(views))
	last := int64(0)
	for step := 0; step < steps; step++ {
		k := rng.Intn(len(views))
		var at int64
		switch c := rng.Intn(10); {
		case c < 3:
			at = ends[k] // on from where this view stopped
		case c < 5:
			at = last // on from where any view stopped
		case c < 8 && len(ps) > 0:
			at = ps[rng.Intn(len(ps))]
		default:
			at = rng.Int63n(int64(len(want)))
		}
		at = max(min(at, int64(len(want))), 0)
		var size int
		switch c := rng.Intn(8); c {
		case 0:
			size = 1
		case 1:
			size = 1 + rng.Intn(16)
		case 2:
			size = 1 + rng.Intn(600)
		case 3:
			size = 4096
		case 4:
			size = 1 + rng.Intn(80000)
		case 5:
			size = 1 + rng.Intn(300<<10)
		case 6: // to the end of a record, or one past it
			if i := bytes.IndexByte(want[min(at, int64(len(want))):], '\n'); i >= 0 {
				size = i + 1 + rng.Intn(2)
			} else {
				size = 7
			}
		default:
			size = 128 << 10
		}
		if rng.Intn(12) == 0 {
			for _, s := range p.segments() {
				s.views.dropInner()
			}
		}
		b := make([]byte, size)
		n, err := views[k].ReadAt(b, at)
		if err != nil {
			require.ErrorIs(t, err, io.EOF, "%s: step %d: view %d read %d at %d", what, step, k, size, at)
		}
		end := min(at+int64(size), int64(len(want)))
		require.Equal(t, string(want[at:end]), string(b[:n]), "%s: step %d: view %d read %d at %d", what, step, k, size, at)
		require.Equal(t, int(end-at), n, "%s: step %d: view %d read %d at %d: short", what, step, k, size, at)
		ends[k], last = at+int64(n), at+int64(n)
		if ends[k] >= int64(len(want)) {
			ends[k] = 0
		}
		if last >= int64(len(want)) {
			last = 0
		}
	}
}

// Random and sequential reads by several views in turns, of big batches
// with empty, null and window-long records, across segment rolls, with
// marks made, used, dropped and evicted: every byte is the rendering's.
func TestBigBatchAdvWalk(t *testing.T) {
	for _, c := range []struct {
		maxInner int
		interval int64
	}{{innerMax, viewInterval}, {1, viewInterval}, {3, viewInterval}, {innerMax, 1 << 20}, {2, 300 << 10}} {
		maxInner := c.maxInner
		t.Run(fmt.Sprint("innerMax=", maxInner, ",viewInterval=", c.interval), func(t *testing.T) {
			defer func(n int, i int64) { innerMax, viewInterval = n, i }(innerMax, viewInterval)
			innerMax, viewInterval = maxInner, c.interval
			l := openLog(t, t.TempDir(), Options{})
			top, _ := l.CreateTopic("t", 1, small("segment.bytes=2000000"))
			p, _ := top.Partition(0)
			rng := rand.New(rand.NewSource(advSeed(int64(22 + maxInner))))
			for i := 0; i < 30; i++ {
				_, err := p.Append(advValues(rng, i, rng.Intn(3) != 0))
				require.NoError(t, err)
			}
			require.Greater(t, len(p.segments()), 2)
			for _, f := range []Format{Values, JSONL} {
				want := renderAll(t, p, f, 0)
				views := make([]*View, 3)
				for k := range views {
					v, err := p.NewView(f, 0)
					require.NoError(t, err)
					views[k] = v
				}
				advWalk(t, p, views, want, rng, advSteps(1500), f.String())
				for _, v := range views {
					require.NoError(t, v.Close())
				}
			}
		})
	}
}

// Views from every kind of start offset, inside big batches most of all,
// read the rendering from that offset on, in turns and at random.
func TestBigBatchAdvWalkFromInside(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=2000000"))
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(advSeed(2222)))
	for i := 0; i < 16; i++ {
		_, err := p.Append(advValues(rng, i, rng.Intn(4) != 0))
		require.NoError(t, err)
	}
	end := int64(p.EndOffset())
	for _, f := range []Format{Values, JSONL} {
		for k := 0; k < advSteps(12); k++ {
			from := record.Offset(rng.Int63n(end))
			want := renderAll(t, p, f, from)
			v1, err := p.NewView(f, from)
			require.NoError(t, err)
			v2, err := p.NewView(f, from)
			require.NoError(t, err)
			size, err := v1.Size()
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), size)
			advWalk(t, p, []*View{v1, v2}, want, rng, 300, fmt.Sprintf("%v from %d", f, from))
			require.NoError(t, v1.Close())
			require.NoError(t, v2.Close())
		}
	}
}

// ReadCommitted and ReadUncommitted views of big transactional batches,
// with aborted ones (hidden) before them in the segment, read the
// rendering the model gives.
func TestBigBatchAdvWalkTxn(t *testing.T) {
	dir := t.TempDir()
	w := newTxnWriter(t, dir, broker.Options{SegmentBytes: 3 << 20})
	rng := rand.New(rand.NewSource(advSeed(222)))
	big := func(pid, i int) []string {
		vals := make([]string, 150+rng.Intn(400))
		for k := range vals {
			switch rng.Intn(50) {
			case 0:
				vals[k] = ""
			case 1:
				vals[k] = strings.Repeat("W", innerWindow+rng.Intn(innerWindow))
			default:
				vals[k] = fmt.Sprintf("p%d-%d-%d-%s", pid, i, k, strings.Repeat("v", rng.Intn(500)))
			}
		}
		return vals
	}
	inTxn := map[int64]bool{}
	for i := 0; i < 70; i++ {
		pid := int64(rng.Intn(3))
		switch {
		case pid == 0:
			if rng.Intn(3) == 0 {
				w.write(-1, false, fmt.Sprint("plain-small-", i))
			} else {
				w.write(-1, false, big(0, i)...)
			}
		case inTxn[pid] && rng.Intn(3) == 0:
			w.marker(pid, rng.Intn(2) == 0)
			inTxn[pid] = false
		default:
			w.write(pid, true, big(int(pid), i)...)
			inTxn[pid] = true
		}
	}
	for pid := int64(1); pid <= 2; pid++ {
		if inTxn[pid] {
			w.marker(pid, pid == 1)
		}
	}
	w.write(-1, false, big(0, 999)...)
	require.NoError(t, w.p.Close())
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted, ReadCommitted + 100} {
		defer func(i int64) { viewInterval = i }(viewInterval)
		if iso == ReadCommitted+100 { // entries far apart: reads scan from one before the batch
			iso, viewInterval = ReadCommitted, 1<<20
		}
		l := openLog(t, dir, Options{ReadOnly: true, Isolation: iso})
		p, err := l.Partition("tx", 0)
		require.NoError(t, err)
		for _, f := range []Format{Values, JSONL} {
			want := w.expected(t, p, f, iso, 0)
			views := make([]*View, 3)
			for k := range views {
				views[k], err = p.NewView(f, 0)
				require.NoError(t, err)
			}
			size, err := views[0].Size()
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), size)
			advWalk(t, p, views, want, rng, advSteps(1500), fmt.Sprintf("%v %v", iso, f))
			for _, v := range views {
				require.NoError(t, v.Close())
			}
			// Views from offsets inside big batches, with hidden ones before.
			for k := 0; k < advSteps(6); k++ {
				from := record.Offset(rng.Int63n(int64(p.EndOffset())))
				v, err := p.NewView(f, from)
				require.NoError(t, err)
				v2, err := p.NewView(f, from)
				require.NoError(t, err)
				want := w.expected(t, p, f, iso, from)
				size, err := v.Size()
				require.NoError(t, err)
				require.Equal(t, int64(len(want)), size, "%v %v from %d", iso, f, from)
				advWalk(t, p, []*View{v, v2}, want, rng, 200, fmt.Sprintf("%v %v from %d", iso, f, from))
				require.NoError(t, v.Close())
				require.NoError(t, v2.Close())
			}
		}
		require.NoError(t, l.Close())
	}
}

var _ = errors.Is

// advDamaged builds a log whose first segment holds a small batch, big
// batches X, Y, Z and a small one, and a second segment after it, and
// damages Y as kind says; it returns the log dir and the rendering of the
// records before Y in each format.
// advBadData says err is what a read of advDamaged's data reports where the
// damage starts: the bad batch, or for "truncated" (the log's last batch
// torn below the recovery point of a clean shutdown, so its offsets are a
// durable end lost) the hole a read-only open shows there, as the
// writable open that cuts it will.
func advBadData(kind string, err error) bool {
	if kind == "truncated" {
		return errors.Is(err, ErrHole)
	}
	return badData(err)
}

func advDamaged(t *testing.T, kind string) (string, map[Format][]byte) {
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=400000"))
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(7))
	appendBig := func(tag string) {
		recs := make([]Record, 300)
		for k := range recs {
			recs[k] = Record{Value: []byte(fmt.Sprintf("%s%03d%s", tag, k, strings.Repeat(tag, rng.Intn(500))))}
		}
		recs[7].Value = bytes.Repeat([]byte(tag), innerWindow+100) // longer than a window
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	_, err = p.Append([]Record{{Value: []byte("first")}})
	require.NoError(t, err)
	appendBig("X")
	appendBig("Y")
	if kind != "truncated" {
		appendBig("Z")
		_, err = p.Append([]Record{{Value: []byte("last of segment 0")}})
		require.NoError(t, err)
		appendBig("Q") // rolls
		require.Greater(t, len(p.segments()), 1)
	}
	seg := p.segments()[0]
	bad := batchesOf(t, seg, true)[2]
	require.Equal(t, "Y000", string(func() []byte {
		r, _ := p.NewReader(bad.BaseOffset)
		defer r.Close()
		rec, err := r.Next()
		require.NoError(t, err)
		return rec.Value[:4]
	}()))
	prefix := map[Format][]byte{}
	for _, f := range []Format{Values, JSONL} {
		r, err := p.NewReader(0)
		require.NoError(t, err)
		for {
			rec, err := r.Next()
			require.NoError(t, err)
			if rec.Offset >= bad.BaseOffset {
				break
			}
			prefix[f] = f.Append(prefix[f], rec)
		}
		r.Close()
	}
	logPath := seg.logPath()
	require.NoError(t, l.Close())

	raw := append([]byte(nil), bad.Bytes...)
	recrc := func() {
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	}
	switch kind {
	case "flipped byte":
		raw[len(raw)/2] ^= 0x20
	case "count-1":
		binary.BigEndian.PutUint32(raw[57:], uint32(bad.RecordCount-1))
		recrc()
	case "count+1":
		binary.BigEndian.PutUint32(raw[57:], uint32(bad.RecordCount+1))
		recrc()
	case "length-1000":
		binary.BigEndian.PutUint32(raw[8:], binary.BigEndian.Uint32(raw[8:])-1000)
	case "truncated":
		require.NoError(t, os.Truncate(logPath, int64(bad.Pos)+int64(len(raw))/2))
		return dir, prefix
	default:
		t.Fatalf("kind %q", kind)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(raw, int64(bad.Pos))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return dir, prefix
}

// A bad big batch after a good big one: nothing of it is served, however
// the view first gets there (on a log just opened, so that this read is
// the one that meets it): sequential reads of any size that cut the batch
// before it, with or without its marks, two views in turns, a first read
// that lands inside it, random reads; the read that reaches it fails, and
// the size stops before it.
func TestBigBatchAdvBadBigBatch(t *testing.T) {
	t.Parallel() // its own folder and no package settings: runs beside the other slow ones
	for _, kind := range []string{"flipped byte", "count-1", "count+1", "length-1000", "truncated"} {
		t.Run(kind, func(t *testing.T) {
			dir, prefix := advDamaged(t, kind)
			for _, iso := range []Isolation{ReadUncommitted, ReadCommitted} {
				for _, f := range []Format{Values, JSONL} {
					want := prefix[f]
					open := func(what string, marked bool) (*Log, *Partition) {
						l, err := Open(dir, Options{ReadOnly: true, Isolation: iso, Logger: testLogger(t), RetentionCheckInterval: -1})
						require.NoError(t, err)
						p, err := l.Partition("t", 0)
						require.NoError(t, err)
						if marked { // X gets its marks first
							v, err := p.NewView(f, 0)
							require.NoError(t, err)
							_, err = v.ReadAt(make([]byte, 10), int64(len(want))-50000)
							require.NoError(t, err, what)
							require.NoError(t, v.Close())
						}
						return l, p
					}
					for _, marked := range []bool{false, true} {
						what := fmt.Sprintf("%s %v %v marked=%v", kind, iso, f, marked)
						// A read that lands inside the bad batch.
						l, p := open(what, marked)
						v, err := p.NewView(f, 0)
						require.NoError(t, err)
						n, err := v.ReadAt(make([]byte, 5000), int64(len(want))+20000)
						require.True(t, advBadData(kind, err), "%s: a read inside the bad batch: %d bytes, %v", what, n, err)
						require.Zero(t, n, what)
						size, err := v.Size()
						require.NoError(t, err)
						require.Equal(t, int64(len(want)), size, "%s: size", what)
						require.NoError(t, v.Close())
						require.NoError(t, l.Close())

						// Sequential reads.
						for _, size := range []int{1, 100, 3000, 40000, 70000, 1 << 20} {
							if raceEnabled && size == 1 {
								continue // minutes under the race detector; the plain run reads byte by byte
							}
							l, p := open(what, marked)
							v, err := p.NewView(f, 0)
							require.NoError(t, err)
							got, rerr := readView(t, v, size)
							require.True(t, advBadData(kind, rerr), "%s: reads of %d: %v", what, size, rerr)
							require.Equal(t, string(want), string(got), "%s: reads of %d", what, size)
							sz, err := v.Size()
							require.NoError(t, err)
							require.Equal(t, int64(len(want)), sz, "%s: size", what)
							require.NoError(t, v.Close())
							require.NoError(t, l.Close())
						}

						// Two views in turns.
						rng := rand.New(rand.NewSource(9))
						l, p = open(what, marked)
						vs := [2]*View{}
						for k := range vs {
							vs[k], err = p.NewView(f, 0)
							require.NoError(t, err)
						}
						var got []byte
						var rerr error
						for k := 0; ; k++ {
							b := make([]byte, 1+rng.Intn(50000))
							n, err := vs[k%2].ReadAt(b, int64(len(got)))
							got = append(got, b[:n]...)
							if err != nil {
								rerr = err
								break
							}
							require.NotZero(t, n, what)
						}
						require.True(t, advBadData(kind, rerr), "%s: views in turn: %v", what, rerr)
						require.Equal(t, string(want), string(got), "%s: views in turn", what)
						for k := range vs {
							require.NoError(t, vs[k].Close())
						}
						require.NoError(t, l.Close())

						// Random reads.
						l, p = open(what, marked)
						v, err = p.NewView(f, 0)
						require.NoError(t, err)
						for j := 0; j < 200; j++ {
							at := rng.Int63n(int64(len(want)) + 100000)
							b := make([]byte, 1+rng.Intn(40000))
							n, err := v.ReadAt(b, at)
							if at >= int64(len(want)) {
								require.True(t, advBadData(kind, err), "%s: read %d at %d past the bad batch's start %d: %d bytes, %v", what, len(b), at, len(want), n, err)
								require.Zero(t, n)
								continue
							}
							if err != nil {
								require.True(t, advBadData(kind, err), "%s: %v", what, err)
							}
							end := min(at+int64(len(b)), int64(len(want)))
							require.Equal(t, string(want[at:end]), string(b[:n]), "%s: read %d at %d", what, len(b), at)
						}
						require.NoError(t, v.Close())
						require.NoError(t, l.Close())
					}
				}
			}
		})
	}
}

// Views of both formats read, in turns and at random, while big and small
// batches are appended and segments roll: every read is a piece of the
// final rendering (checked once the appends are done). Run with -race.
func TestBigBatchAdvReadsWhileAppending(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=1500000"))
	p, _ := top.Partition(0)
	rng := rand.New(rand.NewSource(77))
	plan := make([][]Record, 40)
	for i := range plan {
		plan[i] = advValues(rng, i, rng.Intn(3) != 0)
	}
	_, err := p.Append(plan[0])
	require.NoError(t, err)
	type piece struct {
		f   Format
		at  int64
		got []byte
	}
	done := make(chan struct{})
	results := make(chan []piece, 4)
	for g := 0; g < 4; g++ {
		f := Format(g % 2)
		go func(g int) {
			rng := rand.New(rand.NewSource(int64(g)))
			var out []piece
			defer func() { results <- out }()
			vs := [2]*View{}
			for k := range vs {
				v, err := p.NewView(f, 0)
				if err != nil {
					t.Error(err)
					return
				}
				vs[k] = v
				defer v.Close()
			}
			at := int64(0)
			for k := 0; ; k++ {
				select {
				case <-done:
					if k%50 == 0 {
						return
					}
				default:
				}
				if k > 20000 {
					return
				}
				size, err := vs[k%2].Size()
				if err != nil {
					t.Error(err)
					return
				}
				if size == 0 {
					continue
				}
				if rng.Intn(4) == 0 || at >= size {
					at = rng.Int63n(size)
				}
				b := make([]byte, 1+rng.Intn(1+rng.Intn(200000)))
				n, err := vs[k%2].ReadAt(b, at)
				if err != nil && err != io.EOF {
					t.Error(err)
					return
				}
				out = append(out, piece{f, at, b[:n]})
				at += int64(n)
			}
		}(g)
	}
	for _, recs := range plan[1:] {
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	close(done)
	want := map[Format][]byte{Values: renderAll(t, p, Values, 0), JSONL: renderAll(t, p, JSONL, 0)}
	for g := 0; g < 4; g++ {
		for _, pc := range <-results {
			w := want[pc.f]
			require.LessOrEqual(t, pc.at+int64(len(pc.got)), int64(len(w)))
			require.Equal(t, string(w[pc.at:pc.at+int64(len(pc.got))]), string(pc.got), "%v read at %d", pc.f, pc.at)
		}
	}
}

// The memory marks take (innerBytes) comes back once the views and the log
// are closed, also when a read met bad bytes and its segment's view index
// was replaced (viewIndexes.replace): the marks of the old index, made
// before and after the replacement by views that keep it, must go too,
// or the budget (innerBudget, for every log of the process) shrinks for
// good and big batches stop getting marks.
func TestBigBatchAdvMarksGoWithReplacedIndex(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprint("damaged=", damaged), func(t *testing.T) { advMarksGo(t, damaged) })
	}
}

func advMarksGo(t *testing.T, damaged bool) {
	before := innerBytes.Load()
	dir := t.TempDir()
	l, err := Open(dir, Options{Logger: testLogger(t), RetentionCheckInterval: -1})
	require.NoError(t, err)
	top, _ := l.CreateTopic("t", 1, small("segment.bytes=8000000"))
	p, _ := top.Partition(0)
	for _, tag := range []string{"X", "Y", "Z"} {
		recs := make([]Record, 300)
		for k := range recs {
			recs[k] = Record{Value: []byte(tag + strings.Repeat("v", 400))}
		}
		_, err := p.Append(recs)
		require.NoError(t, err)
	}
	seg := p.segments()[0]
	bad := batchesOf(t, seg, true)[1]
	if damaged {
		writeLog(t, seg, []byte{bad.Bytes[len(bad.Bytes)/2] ^ 1}, int64(bad.Pos)+int64(len(bad.Bytes)/2))
	}

	v, err := p.NewView(Values, 0)
	require.NoError(t, err)
	got, rerr := readView(t, v, 4096) // marks X, then meets Y
	if damaged {
		require.True(t, badData(rerr), "%v", rerr)
		require.Equal(t, 300*402, len(got))
	} else {
		require.NoError(t, rerr)
		require.Equal(t, 3*300*402, len(got))
	}
	x := batchesOf(t, seg, false)[0].Pos
	if damaged {
		require.NotSame(t, v.idx[0], seg.views.get(seg, Values), "the index was replaced")
		require.Nil(t, v.idx[0].innerAt(x), "the replaced index keeps no marks")
	} else {
		require.Greater(t, innerBytes.Load(), before, "X got marks")
		require.NotNil(t, v.idx[0].innerAt(x), "in the view's index")
	}
	// The view keeps its index (v.idx) and reads on in it, making no
	// marks in a replaced one.
	b := make([]byte, 100)
	n, err := v.ReadAt(b, 1000)
	require.NoError(t, err)
	require.Equal(t, string(got[1000:1000+n]), string(b[:n]))
	if damaged {
		require.Nil(t, v.idx[0].innerAt(x), "the replaced index keeps no marks")
	}
	require.NoError(t, v.Close())
	require.NoError(t, l.Close())
	require.Equal(t, before, innerBytes.Load(), "marks left counted after the log closed: %d bytes", innerBytes.Load()-before)
}

// A view whose last read stopped inside the good big batch before a bad
// one (a cut pending) carries on after another view met the bad batch:
// it serves the rest of the good batch, and fails at the bad one.
func TestBigBatchAdvCutPendingWhenAnotherViewMeetsBadBytes(t *testing.T) {
	for _, kind := range []string{"flipped byte", "count-1", "count+1", "truncated"} {
		t.Run(kind, func(t *testing.T) {
			dir, prefix := advDamaged(t, kind)
			l, err := Open(dir, Options{ReadOnly: true, Logger: testLogger(t), RetentionCheckInterval: -1})
			require.NoError(t, err)
			defer l.Close()
			p, err := l.Partition("t", 0)
			require.NoError(t, err)
			for _, f := range []Format{Values, JSONL} {
				want := prefix[f]
				for _, first := range []int{100, 5000, 40000, len(want) - 300, len(want) - 1} {
					for _, marked := range []bool{false, true} {
						for _, s := range p.segments() {
							s.views.dropInner()
						}
						if marked { // X has marks before a's first read
							w, err := p.NewView(f, 0)
							require.NoError(t, err)
							_, err = w.ReadAt(make([]byte, 10), int64(len(want))-50000)
							require.NoError(t, err)
							require.NoError(t, w.Close())
						}
						a, err := p.NewView(f, 0)
						require.NoError(t, err)
						b, err := p.NewView(f, 0)
						require.NoError(t, err)
						got := make([]byte, first)
						n, err := a.ReadAt(got, 0)
						require.NoError(t, err)
						require.Equal(t, first, n)
						rest, rerr := readView(t, b, 3000)
						require.True(t, advBadData(kind, rerr), "%v", rerr)
						require.Equal(t, string(want), string(rest))
						for {
							buf := make([]byte, 700)
							k, err := a.ReadAt(buf, int64(len(got)))
							got = append(got, buf[:k]...)
							if err != nil {
								require.True(t, advBadData(kind, err), "%v", err)
								break
							}
							require.NotZero(t, k)
						}
						require.Equal(t, string(want), string(got), "%v: first read %d, marked %v", f, first, marked)
						require.NoError(t, a.Close())
						require.NoError(t, b.Close())
					}
				}
			}
		})
	}
}

// Every record boundary of a big batch (its start, its '\n', a byte
// either side), of records empty, null, one byte, and longer than a
// window, placed around the marks: a fresh view's read there of 1 byte,
// 2, up to the record's end and one past it, then reads on, all
// match the rendering, with the batch's marks made before or not.
func TestBigBatchAdvEveryBoundary(t *testing.T) {
	t.Parallel() // its own folder and no package settings: runs beside the other slow ones
	l := openLog(t, t.TempDir(), Options{})
	top, _ := l.CreateTopic("t", 1, nil)
	p, _ := top.Partition(0)
	_, err := p.Append([]Record{{Value: []byte("a small batch first")}})
	require.NoError(t, err)
	var recs []Record
	rng := rand.New(rand.NewSource(5))
	for len(recs) < 260 {
		switch k := rng.Intn(12); k {
		case 0:
			recs = append(recs, Record{Value: nil})
		case 1:
			recs = append(recs, Record{Value: []byte{}})
		case 2:
			recs = append(recs, Record{Value: []byte("x")})
		case 3:
			if rng.Intn(8) == 0 {
				recs = append(recs, Record{Value: bytes.Repeat([]byte("L"), innerWindow+rng.Intn(innerWindow))})
			}
		default:
			recs = append(recs, Record{Value: []byte(fmt.Sprintf("r%d-%s", len(recs), strings.Repeat("z", rng.Intn(1500))))})
		}
	}
	recs[0].Value = bytes.Repeat([]byte("F"), innerWindow+10)                    // the first record is longer than a window
	recs = append(recs, Record{Value: bytes.Repeat([]byte("E"), 2*innerWindow)}) // and the last
	_, err = p.Append(recs)
	require.NoError(t, err)
	_, err = p.Append([]Record{{Value: []byte("a small batch after")}})
	require.NoError(t, err)
	bigPos := batchesOf(t, p.segments()[0], false)[1].Pos
	for _, f := range []Format{Values, JSONL} {
		want := renderAll(t, p, f, 0)
		ps := advPositions(want)
		for _, marked := range []bool{false, true} {
			for i, at := range ps {
				if at < 0 || at >= int64(len(want)) || raceEnabled && i%10 != 0 {
					continue
				}
				toEnd := bytes.IndexByte(want[at:], '\n') + 1
				for _, size := range []int{1, 2, toEnd, toEnd + 1} {
					s := p.segments()[0]
					if marked {
						if vi := s.views.get(s, f); vi.innerAt(bigPos) == nil {
							w, err := p.NewView(f, 0)
							require.NoError(t, err)
							_, err = w.ReadAt(make([]byte, 1), 100000)
							require.NoError(t, err)
							require.NoError(t, w.Close())
							require.NotNil(t, vi.innerAt(bigPos))
						}
					} else {
						s.views.dropInner()
					}
					v, err := p.NewView(f, 0)
					require.NoError(t, err)
					from := at
					for step, sz := range []int{size, size, 3000} {
						b := make([]byte, sz)
						n, err := v.ReadAt(b, from)
						if err != nil {
							require.ErrorIs(t, err, io.EOF)
						}
						end := min(from+int64(sz), int64(len(want)))
						require.Equal(t, string(want[from:end]), string(b[:n]), "%v marked %v: read %d of %d at %d (from %d)", f, marked, step, sz, from, at)
						from += int64(n)
						if from >= int64(len(want)) {
							break
						}
					}
					require.NoError(t, v.Close())
				}
			}
		}
	}
}

// advCountFS counts the bytes read from .log files.
type advCountFS struct {
	vfs.FS
	read *atomic.Int64
}

type advCountFile struct {
	vfs.File
	read *atomic.Int64
}

func (fs advCountFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return advCountFile{f, fs.read}, nil
}

func (f advCountFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	f.read.Add(int64(n))
	return n, err
}

// Once a big batch has marks, a read inside it reads about a window from
// the mark before the wanted byte, not the whole batch (the package
// comment in viewinner.go): also for a big batch that no view index entry
// starts at, as one that follows a small batch closer than viewInterval
// to the entry before it.
func TestBigBatchAdvMarkedBatchNotReadWhole(t *testing.T) {
	var read atomic.Int64
	dir := t.TempDir()
	l := openLog(t, dir, Options{FS: advCountFS{vfs.Confined(dir, nil), &read}})
	top, _ := l.CreateTopic("t", 1, nil)
	p, _ := top.Partition(0)
	var bases []record.Offset // each big batch's base offset
	for i := 0; i < 6; i++ {
		recs := make([]Record, 1000)
		for k := range recs {
			recs[k] = Record{Value: []byte(fmt.Sprintf("%d-%04d-%s", i, k, strings.Repeat("b", 290)))}
		}
		base, err := p.Append(recs)
		require.NoError(t, err)
		bases = append(bases, base)
		_, err = p.Append([]Record{{Value: []byte("small")}}) // a small batch between big ones
		require.NoError(t, err)
	}
	s := p.segments()[0]
	batches := batchesOf(t, s, false)
	for _, f := range []Format{Values, JSONL} {
		want := renderAll(t, p, f, 0)
		for i, base := range bases {
			require.Equal(t, base, batches[2*i].BaseOffset)
			pos := int64(len(want)-len(renderAll(t, p, f, base))) + 200000 // inside big batch i
			v, err := p.NewView(f, 0)
			require.NoError(t, err)
			b := make([]byte, 100)
			_, err = v.ReadAt(b, pos) // the first read: the batch gets its marks
			require.NoError(t, err)
			require.NoError(t, v.Close())
			require.NotNil(t, s.views.get(s, f).innerAt(batches[2*i].Pos), "%v: big batch %d has marks", f, i)
			v, err = p.NewView(f, 0)
			require.NoError(t, err)
			before := read.Load()
			_, err = v.ReadAt(b, pos+1000)
			require.NoError(t, err)
			got := read.Load() - before
			require.NoError(t, v.Close())
			require.Equal(t, string(want[pos+1000:pos+1100]), string(b))
			require.Less(t, got, int64(4*innerWindow), "%v: a read in big batch %d (of %d bytes) with marks read %d bytes of the log", f, i, batches[2*i].Size(), got)
		}
	}
}
