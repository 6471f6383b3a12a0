package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// subject is what the storage phases drive: logfs's storage API, or raw
// I/O of the same values. A subject is used by one goroutine.
type subject interface {
	append(vals [][]byte, recs []storage.Record) error
	sync() error
	lookup(off int64) ([]byte, error)
	lookupTime(ts int64) (int64, error) // errNoTimeLookup for raw
	readAll(fn func(v []byte)) (int64, error)
	close() error
}

// topic is the one topic, of one partition, of every logfs data set.
const topic = "bench"

// openStorage opens a data directory for the benchmark: no log output, no
// retention work in the background.
func openStorage(dir string) (*storage.Log, error) {
	return storage.Open(dir, storage.Options{Logger: slog.New(slog.DiscardHandler), RetentionCheckInterval: -1})
}

// openSubject opens the data set of subj in dir, creating it if needed.
func openSubject(subj, dir string, segmentBytes int64) (subject, error) {
	if subj == SubjectRaw {
		b, err := openRaw(dir)
		if err != nil {
			return nil, err
		}
		// Reopening rebuilds the positions with one scan, outside timing.
		if st, err := b.f.Stat(); err == nil && st.Size() > 0 {
			if _, err := b.f.Seek(0, io.SeekStart); err != nil {
				return nil, errors.Join(err, b.close())
			}
			var pos int64
			if _, err := b.readAll(func(v []byte) { b.pos = append(b.pos, pos); pos += 8 + int64(len(v)) }); err != nil {
				return nil, errors.Join(err, b.close())
			}
			b.end = pos
		}
		return b, nil
	}
	return openLogfs(dir, segmentBytes)
}

// logfsSubject is partition 0 of the topic bench, through the storage API.
type logfsSubject struct {
	l *storage.Log
	p *storage.Partition
	r *storage.Reader
}

func openLogfs(dir string, segmentBytes int64) (*logfsSubject, error) {
	l, err := openStorage(dir)
	if err != nil {
		return nil, err
	}
	p, err := l.Partition(topic, 0)
	if errors.Is(err, storage.ErrNoTopic) {
		var t *storage.Topic
		// flush.ms=-1: nothing fsyncs but Sync, as for raw.
		t, err = l.CreateTopic(topic, 1, storage.Overrides{"segment.bytes": segmentBytes, "flush.ms": -1, "retention.ms": -1})
		if err == nil {
			p, err = t.Partition(0)
		}
	}
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return &logfsSubject{l: l, p: p}, nil
}

func (b *logfsSubject) append(_ [][]byte, recs []storage.Record) error {
	want := b.p.EndOffset()
	first, err := b.p.Append(recs)
	if err == nil && first != want {
		err = fmt.Errorf("wrong data: appended at offset %d, want %d", first, want)
	}
	return err
}

func (b *logfsSubject) sync() error { return b.p.Sync() }

func (b *logfsSubject) lookup(off int64) ([]byte, error) {
	var err error
	if b.r == nil {
		b.r, err = b.p.NewReader(record.Offset(off))
	} else {
		err = b.r.Seek(record.Offset(off))
	}
	if err != nil {
		return nil, err
	}
	rec, err := b.r.Next()
	if err != nil {
		return nil, err
	}
	if int64(rec.Offset) != off {
		return nil, fmt.Errorf("wrong data: lookup of %d read offset %d", off, rec.Offset)
	}
	return rec.Value, nil
}

func (b *logfsSubject) lookupTime(ts int64) (int64, error) {
	off, err := b.p.OffsetForTime(ts)
	return int64(off), err
}

func (b *logfsSubject) readAll(fn func(v []byte)) (n int64, err error) {
	r, err := b.p.NewReader(0)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if int64(rec.Offset) != n {
			return n, fmt.Errorf("wrong data: record %d has offset %d", n, rec.Offset)
		}
		fn(rec.Value)
		n++
	}
}

func (b *logfsSubject) close() error {
	if b.r != nil {
		b.r.Close()
	}
	return b.l.Close()
}

// rawSubject is the physical floor: [len u64 LE][value]… in one file, one
// write(2) per batch, 1 MiB read(2)s, one pread(2) per lookup at a position
// kept in memory.
type rawSubject struct {
	f    *os.File
	pos  []int64
	end  int64
	wbuf []byte
	rbuf []byte
}

func openRaw(dir string) (*rawSubject, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &rawSubject{f: f}, nil
}

func (b *rawSubject) append(vals [][]byte, _ []storage.Record) error {
	w := b.wbuf[:0]
	pos := b.end
	for _, v := range vals {
		b.pos = append(b.pos, pos)
		w = binary.LittleEndian.AppendUint64(w, uint64(len(v)))
		w = append(w, v...)
		pos += 8 + int64(len(v))
	}
	b.wbuf = w
	if _, err := b.f.Write(w); err != nil {
		return err
	}
	b.end = pos
	return nil
}

func (b *rawSubject) sync() error { return b.f.Sync() }

func (b *rawSubject) lookup(off int64) ([]byte, error) {
	start, end := b.pos[off], b.end
	if off+1 < int64(len(b.pos)) {
		end = b.pos[off+1]
	}
	n := int(end - start)
	if cap(b.rbuf) < n {
		b.rbuf = make([]byte, n)
	}
	buf := b.rbuf[:n]
	if _, err := b.f.ReadAt(buf, start); err != nil {
		return nil, err
	}
	return buf[8:], nil
}

func (b *rawSubject) lookupTime(int64) (int64, error) { return 0, errNoTimeLookup }

func (b *rawSubject) readAll(fn func(v []byte)) (int64, error) {
	if _, err := b.f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var have int
	var n int64
	for {
		k, err := b.f.Read(buf[have:])
		have += k
		p := 0
		for have-p >= 8 {
			sz := int(binary.LittleEndian.Uint64(buf[p:]))
			if have-p-8 < sz {
				if 8+sz > len(buf) { // a record larger than the buffer
					nb := make([]byte, 8+sz+len(buf))
					have = copy(nb, buf[p:have])
					buf, p = nb, 0
				}
				break
			}
			fn(buf[p+8 : p+8+sz])
			n++
			p += 8 + sz
		}
		have = copy(buf, buf[p:have])
		if err == io.EOF || (err == nil && k == 0) {
			if have != 0 {
				return n, fmt.Errorf("raw: %d trailing bytes", have)
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (b *rawSubject) close() error { return b.f.Close() }
