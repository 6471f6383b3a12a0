package storage

import (
	"errors"
	"testing"

	"github.com/logfs/logfs/record"
)

// TestCheckRecordFastPathAgrees checks CheckRecord's shortcut for records
// that obviously fit against sizing every record exactly, at and around
// the edge of max.message.bytes, with and without a key and headers: the
// shortcut must never let through a record the exact size refuses.
func TestCheckRecordFastPathAgrees(t *testing.T) {
	// Lengths take 5-byte varints from 2^27 bytes on, so a key and a value
	// of 2^27 each have the most framing there is. Only their lengths are
	// read: the buffer is never touched, and takes no memory.
	buf := make([]byte, 1<<28+256)
	for _, maxMessage := range []int64{0, 1, record.HeaderSize, record.HeaderSize + maxFraming, 100, 200, 4096, 16384, 1048588, 1<<20 + 100, 1<<27 + 100, 1<<28 + 100} {
		// The limit as max.message.bytes, and as a smaller segment.bytes.
		for _, cfg := range []Config{{MaxMessageBytes: maxMessage}, {MaxMessageBytes: 1 << 40, SegmentBytes: maxMessage}} {
			edge := int(maxMessage) - record.HeaderSize - maxFraming
			for n := max(edge-40, 0); n <= edge+40 && n <= len(buf); n++ {
				for _, r := range []Record{
					{Value: buf[:n]},
					{Value: nil},
					{Key: buf[:n/2], Value: buf[:n-n/2]},
					{Key: []byte{}, Value: buf[:n]},
					{Value: buf[:n], Headers: []record.Header{{Key: []byte("h")}}},
					{Value: buf[:n], Headers: []record.Header{}},
				} {
					if cfg.MaxMessageBytes != maxMessage && cfg.SegmentBytes <= 0 {
						continue // a segment.bytes of 0 does not count
					}
					got, want := cfg.CheckRecord(&r), checkRecordSize(&r, maxMessage, "")
					if (got == nil) != (want == nil) {
						t.Fatalf("max.message.bytes %d, segment.bytes %d, key %d B, value %d B, %d headers: CheckRecord says %v, the exact size %v", cfg.MaxMessageBytes, cfg.SegmentBytes, len(r.Key), len(r.Value), len(r.Headers), got, want)
					}
					if got != nil && !errors.Is(got, ErrRecordTooLarge) {
						t.Fatalf("max.message.bytes %d: %v does not wrap ErrRecordTooLarge", maxMessage, got)
					}
				}
			}
		}
	}
}
