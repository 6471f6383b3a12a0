// Package kafkaindex writes a segment's index files the way each line of Kafka
// versions writes them, for tests of the rule logfs applies to them.
package kafkaindex

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

// Style is how one line of Kafka versions writes a segment's
// .index and .timeindex. Each style follows LogSegment.append of its
// versions, cited from apache/kafka:
//
//   - Kafka11 (0.10.1 to 1.1): core/src/main/scala/kafka/log/LogSegment.scala
//     at 1.1.0, lines 123-151: an append of one or more batches gets at most
//     one offset entry, (firstOffset, position of the append), when more
//     than index.interval.bytes were appended since the last entry, and a
//     time entry (maxTimestampSoFar, offsetOfMaxTimestamp) with it.
//   - Kafka2x (2.0 to 3.9): the same file at 2.0.0, lines 124-153, and
//     storage/.../internals/log/LogSegment.java at 3.7.0, lines 245-273:
//     the entry is keyed by the append's largest offset, at the append's
//     first batch's position.
//   - Kafka40 (4.0): one decision per batch, keyed by the batch's last
//     offset at its position, as every version's LogSegment.recover
//     rebuilds them (LogSegment.java at 3.7.0, lines 494-498).
//
// Appends of several batches are what followers, the log cleaner and
// segment splits make; the writer groups a segment's batches into appends
// of one to four at random. TimeIndex.maybeAppend (TimeIndex.java, lines
// 183-218 at the snapshot) adds an entry only when the timestamp grows,
// and onBecomeInactiveSegment and close (LogSegment.java at 3.7.0, lines
// 682-687 and 764-771) add the final one, which the writer writes too.
type Style int

const (
	Kafka11 Style = iota
	Kafka2x
	Kafka40
)

func (s Style) String() string {
	return [...]string{"kafka-0.10-1.1", "kafka-2.0-3.9", "kafka-4.0"}[s]
}

// MaxTimestampAt says which offset a time entry names for the largest
// timestamp of an append, as the writers of the offset of the max
// timestamp differ.
type MaxTimestampAt int

const (
	// AtBatchLast is the last offset of the batch that carries it
	// (followers, compressed batches, 3.7+).
	AtBatchLast MaxTimestampAt = iota
	// AtFirstRecord is the offset of the first record that carries it
	// (2.x-3.6 leaders, LogValidator on uncompressed batches).
	AtFirstRecord
	// AtAppendLast is the last offset of the whole append.
	AtAppendLast
)

func (m MaxTimestampAt) String() string {
	return [...]string{"batch-last", "first-record", "append-last"}[m]
}

// Write replaces the .index and .timeindex of every segment in
// the partition folder dir with files written the way style writes them,
// with the given index.interval.bytes, trimmed and with the final time
// entry, as after a clean shutdown. rng groups batches into appends.
func Write(dir string, style Style, at MaxTimestampAt, interval int64, rng *rand.Rand) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*"+layout.LogSuffix))
	if err != nil {
		return err
	}
	sort.Strings(logs)
	for _, path := range logs {
		base, _, ok := layout.ParseSegmentFileName(filepath.Base(path))
		if !ok {
			continue
		}
		batches, err := readBatches(path)
		if err != nil {
			return err
		}
		off, tim := kafkaEntries(batches, base, style, at, interval, rng)
		stem := strings.TrimSuffix(path, layout.LogSuffix)
		if err := os.WriteFile(stem+layout.IndexSuffix, off, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(stem+layout.TimeIndexSuffix, tim, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// batchInfo is what the writers need of a batch.
type batchInfo struct {
	pos        record.Position
	size       int64
	base, last record.Offset
	maxTS      int64
	maxTSAt    record.Offset // the first record carrying maxTS
}

func readBatches(path string) ([]batchInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var out []batchInfo
	var dec record.Decoder
	sc := record.NewScanner(f, 0, record.Position(st.Size()), record.ScanOptions{})
	for sc.Next() {
		b := sc.Batch()
		bi := batchInfo{pos: b.Pos, size: b.Size(), base: b.BaseOffset, last: b.LastOffset(), maxTS: b.MaxTimestamp, maxTSAt: b.LastOffset()}
		if !b.Attributes.LogAppendTime() {
			it, err := dec.Records(b)
			if err != nil {
				return nil, err
			}
			for it.Next() {
				if r := it.Record(); r.Timestamp == b.MaxTimestamp {
					bi.maxTSAt = r.Offset
					break
				}
			}
			if err := it.Err(); err != nil {
				return nil, err
			}
		}
		out = append(out, bi)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// kafkaEntries runs LogSegment.append over the batches, grouped into
// appends, and returns the two index files' bytes.
func kafkaEntries(batches []batchInfo, base record.Offset, style Style, at MaxTimestampAt, interval int64, rng *rand.Rand) (off, tim []byte) {
	var appends [][]batchInfo
	for i := 0; i < len(batches); {
		n := 1
		if style != Kafka40 {
			n = 1 + rng.Intn(4)
		}
		n = min(n, len(batches)-i)
		appends = append(appends, batches[i:i+n])
		i += n
	}
	var bytesSince int64
	maxSoFar, maxAt := int64(-1), base
	lastTS := int64(-1)
	maybeAppendTime := func() {
		if maxSoFar > lastTS {
			tim = binary.BigEndian.AppendUint64(tim, uint64(maxSoFar))
			tim = binary.BigEndian.AppendUint32(tim, uint32(maxAt-base))
			lastTS = maxSoFar
		}
	}
	for _, a := range appends {
		first, lastB := a[0], a[len(a)-1]
		var size int64
		best := 0
		for i, b := range a {
			size += b.size
			if b.maxTS > a[best].maxTS {
				best = i
			}
		}
		if a[best].maxTS > maxSoFar {
			maxSoFar = a[best].maxTS
			switch at {
			case AtBatchLast:
				maxAt = a[best].last
			case AtFirstRecord:
				maxAt = a[best].maxTSAt
			case AtAppendLast:
				maxAt = lastB.last
			}
		}
		if bytesSince > interval {
			key := lastB.last // 2.0-3.9: the append's largest offset; 4.0: the batch's last
			if style == Kafka11 {
				key = first.base
			}
			off = binary.BigEndian.AppendUint32(off, uint32(key-base))
			off = binary.BigEndian.AppendUint32(off, uint32(first.pos))
			maybeAppendTime()
			bytesSince = 0
		}
		bytesSince += size
	}
	maybeAppendTime() // onBecomeInactiveSegment / close: the final entry
	return off, tim
}
