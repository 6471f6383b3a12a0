package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultDecompressLimit bounds the decompressed size of one batch's records
// unless a Decoder is given another limit. Kafka's own limit on a batch is
// max.message.bytes (1 MiB by default) compressed; 64 MiB leaves room for
// highly compressible data while stopping decompression bombs.
const DefaultDecompressLimit = 64 << 20

// xerialMagic opens the snappy framing of xerial's SnappyOutputStream, which
// Kafka uses: 8 magic bytes, then a version and a compatible version (int32
// each), then chunks of [int32 length][raw snappy block].
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// Decoder decompresses the records of batches, keeping its buffers and codec
// state from one batch to the next. The zero value is ready to use.
type Decoder struct {
	// Limit bounds the decompressed size of one batch's records; 0 means
	// DefaultDecompressLimit.
	Limit int

	buf     []byte
	headers []Header
	src     bytes.Reader
	gz      *gzip.Reader
	lz      *lz4.Reader
	zstd    *zstd.Decoder
}

// Records returns an iterator over the records of b. For a compressed batch
// the records are decompressed into the decoder's buffer, so the iterator is
// valid until the next call to Records on the same decoder.
func (d *Decoder) Records(b *Batch) (RecordIter, error) {
	it := RecordIter{h: b.BatchHeader, pos: b.Pos, headers: &d.headers}
	payload := b.Bytes[HeaderSize:]
	if c := b.Attributes.Compression(); c != None {
		data, err := d.decompress(c, payload)
		if err != nil {
			return it, &CorruptError{Pos: b.Pos, Reason: fmt.Sprintf("%v records: %v", c, err), Err: errKind(err)}
		}
		payload = data
	}
	it.data = payload
	return it, nil
}

func errKind(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return ErrTooLarge
	}
	return ErrCorrupt
}

func (d *Decoder) limit() int {
	if d.Limit > 0 {
		return d.Limit
	}
	return DefaultDecompressLimit
}

func (d *Decoder) decompress(c Compression, src []byte) ([]byte, error) {
	d.src.Reset(src)
	switch c {
	case Gzip:
		if d.gz == nil {
			d.gz = new(gzip.Reader)
		}
		if err := d.gz.Reset(&d.src); err != nil {
			return nil, err
		}
		d.gz.Multistream(false)
		return d.readAll(d.gz)
	case Snappy:
		return d.unsnappy(src)
	case LZ4:
		if d.lz == nil {
			d.lz = lz4.NewReader(nil)
		}
		d.lz.Reset(&d.src)
		return d.readAll(d.lz)
	case Zstd:
		if d.zstd == nil {
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxMemory(uint64(d.limit())), zstd.WithDecoderLowmem(true))
			if err != nil {
				return nil, err
			}
			d.zstd = dec
		}
		if err := d.zstd.Reset(&d.src); err != nil {
			return nil, err
		}
		return d.readAll(d.zstd)
	}
	return nil, fmt.Errorf("unknown compression %d", c)
}

// readAll reads r into the decoder's buffer, growing it with what actually
// arrives and never past the limit.
func (d *Decoder) readAll(r io.Reader) ([]byte, error) {
	limit := d.limit()
	buf := d.buf[:0]
	for {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(max(2*cap(buf), 4096), limit+1))
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, ErrTooLarge
		}
		if err == io.EOF {
			d.buf = buf
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// unsnappy decodes xerial-framed snappy, or a bare snappy block, which is
// what xerial's reader falls back to when the magic is absent.
func (d *Decoder) unsnappy(src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return d.snappyBlock(d.buf[:0], src)
	}
	if len(src) < xerialHeaderSize {
		return nil, errors.New("short xerial header")
	}
	out := d.buf[:0]
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return nil, errors.New("short xerial chunk length")
		}
		n := int64(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n > int64(len(src)-p) {
			return nil, errors.New("xerial chunk overruns the batch")
		}
		var err error
		if out, err = d.snappyBlock(out, src[p:p+int(n)]); err != nil {
			return nil, err
		}
		p += int(n)
	}
	d.buf = out
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to out.
func (d *Decoder) snappyBlock(out, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > d.limit()-len(out) {
		return nil, ErrTooLarge
	}
	out = grow(out, n)
	if _, err := snappy.Decode(out[len(out):len(out)+n], block); err != nil {
		return nil, err
	}
	out = out[:len(out)+n]
	d.buf = out
	return out, nil
}

// grow makes room for n more bytes after len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+max(n, len(b)))
	copy(nb, b)
	return nb
}

// compress encodes records with codec c the way Kafka's producers do.
func compress(c Compression, records []byte) ([]byte, error) {
	var out bytes.Buffer
	switch c {
	case Gzip:
		w := gzip.NewWriter(&out)
		if _, err := w.Write(records); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case Snappy:
		out.Write(xerialMagic)
		var v [8]byte
		binary.BigEndian.PutUint32(v[0:], 1) // version
		binary.BigEndian.PutUint32(v[4:], 1) // compatible version
		out.Write(v[:])
		const chunk = 32 << 10 // xerial's default block size
		for p := 0; p < len(records); p += chunk {
			block := snappy.Encode(nil, records[p:min(p+chunk, len(records))])
			var l [4]byte
			binary.BigEndian.PutUint32(l[:], uint32(len(block)))
			out.Write(l[:])
			out.Write(block)
		}
	case LZ4:
		w := lz4.NewWriter(&out)
		if _, err := w.Write(records); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case Zstd:
		w, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(records); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("logfs/record: cannot compress with %v", c)
	}
	return out.Bytes(), nil
}
