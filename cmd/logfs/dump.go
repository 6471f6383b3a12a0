package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
)

func init() { addCommand(newDumpCommand) }

func newDumpCommand() *cobra.Command {
	var d dumper
	cmd := &cobra.Command{
		Use:   "dump [--verify] [--print-data] FILE…",
		Short: "Decode .log, .index and .timeindex files, like Kafka's DumpLogSegments",
		Long: `Decode segment files of a logfs or Kafka data directory, in the format of
Kafka's kafka-dump-log.sh (DumpLogSegments):

  .log        every batch with every header field, then every record
              ("| offset: …"); --print-data adds each record's key and value
  .index      every entry: offset and position
  .timeindex  every entry: timestamp and offset

Invalid batches (bad CRC, bad offsets, a torn or corrupt tail) are reported
and make the exit status 1.

--verify also checks each index against the .log beside it, with the rule
logfs check and reads apply, which every Kafka version's files keep: entries
strictly increasing (a preallocated zero tail ends them); an offset entry at
the start of a batch, keyed at or above that batch's base offset and at or
below the last offset before the next entry's position; a time entry's
timestamp the largest up to its offset, first reached where a lookup of its
offset starts, and the last one the segment's largest (unless the index has
a zero tail, as an active segment's does). Mismatches are listed and make
the exit status 1.`,
		Example: `  logfs dump logfs-data/orders-0/00000000000000000000.log
  logfs dump --print-data logfs-data/orders-0/*.log
  logfs dump --verify logfs-data/orders-0/*.index logfs-data/orders-0/*.timeindex`,
		Args: func(cmd *cobra.Command, a []string) error {
			if len(a) == 0 {
				return usageErrorf("missing FILE (see %s --help)", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := checkFilesExist(files); err != nil {
				return err // before anything is printed
			}
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 256<<10)
			d.out = out
			for _, f := range files {
				d.dumpFile(f)
			}
			if err := out.Flush(); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			switch len(d.problems) {
			case 0:
				return nil
			case 1:
				return d.problems[0]
			}
			return fmt.Errorf("%d problems in %d files (listed above); first: %v", len(d.problems), len(files), d.problems[0])
		},
	}
	cmd.Flags().BoolVar(&d.verify, "verify", false, "check each index against its .log")
	cmd.Flags().BoolVarP(&d.printData, "print-data", "d", false, "print each record's key and value")
	return cmd
}

// dumper prints files and collects what is wrong with them.
type dumper struct {
	verify    bool
	printData bool
	out       io.Writer
	problems  []error
}

// problem records something wrong with a file and prints it in place.
func (d *dumper) problem(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	fmt.Fprintf(d.out, "ERROR: %v\n", err)
	d.problems = append(d.problems, err)
}

func (d *dumper) dumpFile(path string) {
	name := filepath.Base(path)
	base, suffix, ok := layout.ParseSegmentFileName(name)
	if !ok {
		base, suffix = 0, name[strings.IndexByte(name+".", '.'):]
	}
	switch suffix {
	case layout.LogSuffix:
		fmt.Fprintf(d.out, "Dumping %s\n", path)
		d.dumpLog(path, base)
	case layout.IndexSuffix, layout.TimeIndexSuffix:
		if !ok {
			d.problem("%s: an index file must be named by its segment's base offset (00000000000000000000%s)", path, suffix)
			return
		}
		fmt.Fprintf(d.out, "Dumping %s\n", path)
		if suffix == layout.IndexSuffix {
			d.dumpOffsetIndex(path, base)
		} else {
			d.dumpTimeIndex(path, base)
		}
	case layout.ViewIndexSuffix:
		// Derived data private to logfs (see package storage): its format
		// may change between versions and Kafka ignores it.
		fmt.Fprintf(d.out, "Skipping %s: logfs's view index, not decoded\n", path)
	default:
		d.problem("%s: not a .log, .index or .timeindex file", path)
	}
}

// logBatch is what verification needs to know of a batch.
type logBatch struct {
	pos                    record.Position
	baseOffset, lastOffset record.Offset
	maxTimestamp           int64
	valid                  bool
}

// scanLog reads the batches of a .log; each is passed to fn (nil: headers
// only, no CRC check). It returns the batches, the position where the
// valid ones end and the file size, and the error that stopped the scan.
func scanLog(path string, fn func(b *record.Batch)) (batches []logBatch, end, size record.Position, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, 0, err
	}
	size = record.Position(st.Size())
	sc := record.NewScanner(f, 0, size, record.ScanOptions{SkipCRC: true, HeadersOnly: fn == nil})
	for sc.Next() {
		b := sc.Batch()
		lb := logBatch{pos: b.Pos, baseOffset: b.BaseOffset, lastOffset: b.LastOffset(), maxTimestamp: b.MaxTimestamp, valid: true}
		if fn != nil {
			lb.valid = b.Verify() == nil
			fn(b)
		}
		batches = append(batches, lb)
	}
	return batches, sc.Pos(), size, record.WithFile(sc.Err(), path)
}

func (d *dumper) dumpLog(path string, base record.Offset) {
	fmt.Fprintf(d.out, "Log starting offset: %d\n", base)
	var dec record.Decoder
	next := record.Offset(-1)
	_, end, size, err := scanLog(path, func(b *record.Batch) {
		valid := b.Verify() == nil
		d.printBatch(b, valid)
		if !valid {
			d.problem("%s: batch at position %d fails its CRC-32C check", path, b.Pos)
			return
		}
		if b.BaseOffset < next {
			d.problem("%s: batch at position %d starts at offset %d, below %d where the previous batch ended", path, b.Pos, b.BaseOffset, next)
		}
		next = b.NextOffset()
		it, err := dec.Records(b)
		if err != nil {
			d.problem("%v", record.WithFile(err, path))
			return
		}
		for it.Next() {
			d.printRecord(&b.BatchHeader, it.Record())
		}
		if err := it.Err(); err != nil {
			d.problem("%v", record.WithFile(err, path))
		}
	})
	if err != nil && !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, record.ErrTruncated) &&
		!errors.Is(err, record.ErrUnsupportedMagic) && !errors.Is(err, record.ErrTooLarge) {
		d.problem("%s: %v", path, err) // I/O
		return
	}
	if end < size {
		fmt.Fprintf(d.out, "Found %d invalid bytes at the end of %s\n", size-end, filepath.Base(path))
		d.problem("%s: %d invalid bytes from position %d: %v", path, size-end, end, err)
	}
}

func (d *dumper) printBatch(b *record.Batch, valid bool) {
	h := &b.BatchHeader
	lastSeq := int32(-1)
	if h.BaseSequence >= 0 {
		lastSeq = h.BaseSequence + h.LastOffsetDelta
	}
	horizon := "OptionalLong.empty"
	if h.Attributes.DeleteHorizon() {
		horizon = "OptionalLong[" + strconv.FormatInt(h.BaseTimestamp, 10) + "]"
	}
	fmt.Fprintf(d.out, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d "+
		"partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d "+
		"compresscodec: %s crc: %d isvalid: %t baseTimestamp: %d batchLength: %d attributes: %d\n",
		h.BaseOffset, h.LastOffset(), h.RecordCount, h.BaseSequence, lastSeq, h.ProducerID, h.ProducerEpoch,
		h.PartitionLeaderEpoch, h.Attributes.Transactional(), h.Attributes.Control(), horizon, b.Pos, timestampType(h), h.MaxTimestamp, h.Size(), h.Magic,
		codecName(h.Attributes.Compression()), h.CRC, valid, h.BaseTimestamp, h.Length, h.Attributes)
}

func (d *dumper) printRecord(h *record.BatchHeader, r *record.Record) {
	seq := int32(-1)
	if h.BaseSequence >= 0 {
		seq = h.BaseSequence + int32(r.Offset-h.BaseOffset)
	}
	keys := make([]string, len(r.Headers))
	for i, hd := range r.Headers {
		keys[i] = printable(hd.Key)
	}
	fmt.Fprintf(d.out, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
		r.Offset, timestampType(h), r.Timestamp, size(r.Key), size(r.Value), seq, strings.Join(keys, ","))
	if h.Attributes.Control() {
		fmt.Fprint(d.out, controlRecord(r))
	} else if d.printData {
		if r.Key != nil {
			fmt.Fprintf(d.out, " key: %s", printable(r.Key))
		}
		fmt.Fprintf(d.out, " payload: %s", printable(r.Value))
	}
	fmt.Fprintln(d.out)
}

// controlRecord describes a control record as Kafka does: a transaction
// marker's type and coordinator epoch, or another control type's number.
func controlRecord(r *record.Record) string {
	if len(r.Key) < 4 {
		return " controlType: unknown"
	}
	switch typ := int16(binary.BigEndian.Uint16(r.Key[2:4])); typ {
	case 0, 1:
		marker := map[int16]string{0: "ABORT", 1: "COMMIT"}[typ]
		if len(r.Value) < 6 {
			return " endTxnMarker: " + marker
		}
		return fmt.Sprintf(" endTxnMarker: %s coordinatorEpoch: %d", marker, int32(binary.BigEndian.Uint32(r.Value[2:6])))
	default:
		return fmt.Sprintf(" controlType: %d", typ)
	}
}

func timestampType(h *record.BatchHeader) string {
	if h.Attributes.LogAppendTime() {
		return "LogAppendTime"
	}
	return "CreateTime"
}

func codecName(c record.Compression) string {
	switch c {
	case record.None:
		return "none"
	case record.Gzip:
		return "gzip"
	case record.Snappy:
		return "snappy"
	case record.LZ4:
		return "lz4"
	case record.Zstd:
		return "zstd"
	}
	return c.String()
}

// size is a key's or value's length, -1 for null.
func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// printable shows bytes as text when they are printable UTF-8, quoted with
// escapes otherwise, so that every record stays on one line.
func printable(b []byte) string {
	if b == nil {
		return "null"
	}
	if utf8.Valid(b) && strings.IndexFunc(string(b), func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// readEntries reads an index file's entries of n bytes each. Kafka's
// preallocated, untrimmed tail (an active segment's index) is all zeros;
// it ends the entries, and its slots are counted.
func (d *dumper) readEntries(path string, n int) (entries [][]byte, zeroSlots int, ok bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem("%v", err)
		return nil, 0, false
	}
	if len(data)%n != 0 {
		d.problem("%s: %d bytes is not a whole number of %d-byte entries", path, len(data), n)
		return nil, 0, false
	}
	for i := 0; i < len(data); i += n {
		e := data[i : i+n]
		if allZero(e) && (i > 0 || n == index.OffsetEntrySize) {
			zeroSlots = (len(data) - i) / n
			break
		}
		entries = append(entries, e)
	}
	return entries, zeroSlots, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (d *dumper) dumpOffsetIndex(path string, base record.Offset) {
	before := len(d.problems)
	entries, zeros, ok := d.readEntries(path, index.OffsetEntrySize)
	if !ok {
		return
	}
	for _, e := range entries {
		fmt.Fprintf(d.out, "offset: %d position: %d\n", base+record.Offset(binary.BigEndian.Uint32(e)), binary.BigEndian.Uint32(e[4:]))
	}
	if zeros > 0 {
		fmt.Fprintf(d.out, "(%d empty slots of preallocated space)\n", zeros)
	}
	if !d.verify {
		return
	}
	logPath, batches, ok := d.siblingLog(path, base)
	if !ok {
		return
	}
	d.verifyIndex(path, "", base, logPath, batches)
	if len(d.problems) == before {
		fmt.Fprintf(d.out, "Verified %d entries of %s against %s\n", len(entries), filepath.Base(path), filepath.Base(logPath))
	}
}

func (d *dumper) dumpTimeIndex(path string, base record.Offset) {
	before := len(d.problems)
	entries, zeros, ok := d.readEntries(path, index.TimeEntrySize)
	if !ok {
		return
	}
	for _, e := range entries {
		fmt.Fprintf(d.out, "timestamp: %d offset: %d\n", int64(binary.BigEndian.Uint64(e)), base+record.Offset(binary.BigEndian.Uint32(e[8:])))
	}
	if zeros > 0 {
		fmt.Fprintf(d.out, "(%d empty slots of preallocated space)\n", zeros)
	}
	if !d.verify {
		return
	}
	logPath, batches, ok := d.siblingLog(path, base)
	if !ok {
		return
	}
	d.verifyIndex(layout.SegmentPath(filepath.Dir(path), base, layout.IndexSuffix), path, base, logPath, batches)
	if len(d.problems) == before {
		fmt.Fprintf(d.out, "Verified %d entries of %s against %s\n", len(entries), filepath.Base(path), filepath.Base(logPath))
	}
}

// verifyIndex checks an offset index (timePath "") or a time index against
// the batches of its .log, with the rule that storage's Check and a first
// read apply (index.Verifier). A time index is checked with the segment's
// offset index, where a lookup by time starts (a missing or broken one:
// from the segment's start), and as a sealed segment's, ending with the
// largest timestamp, unless it has a zero tail (an active segment's).
func (d *dumper) verifyIndex(offPath, timePath string, base record.Offset, logPath string, batches logBatches) {
	offData, err := os.ReadFile(offPath)
	if err != nil && (timePath == "" || !errors.Is(err, os.ErrNotExist)) {
		d.problem("%v", err)
		return
	}
	off, offErr := index.DecodeOffsetEntries(offPath, offData, base, batches.size)
	v := index.NewVerifier(offPath, off, "", nil, 0)
	sealed := false
	if timePath != "" {
		timeData, err := os.ReadFile(timePath)
		if err != nil {
			d.problem("%v", err)
			return
		}
		tim, err := index.DecodeTimeEntries(timePath, timeData, base, off)
		if err != nil {
			d.problem("%v", err)
			return
		}
		sealed = len(tim)*index.TimeEntrySize == len(timeData)
		v = index.NewVerifier(offPath, nil, timePath, tim, 0)
	} else if offErr != nil {
		d.problem("%v", offErr)
		return
	}
	for _, b := range batches.all {
		v.Batch(index.Batch{Pos: b.pos, Base: b.baseOffset, Last: b.lastOffset, MaxTimestamp: b.maxTimestamp})
	}
	if batches.end < batches.size {
		v.Stop() // a bad batch: reported when the .log is dumped
	}
	for _, err := range v.Finish(sealed, 100) {
		d.problem("%v", err)
	}
}

// logBatches are the batches of a .log, in order.
type logBatches struct {
	all  []logBatch
	end  record.Position // where the valid batches end
	size record.Position
}

// holding finds the batch whose offsets include off.
func (lb logBatches) holding(off record.Offset) (logBatch, bool) {
	lo, hi := 0, len(lb.all)
	for lo < hi {
		m := (lo + hi) / 2
		if lb.all[m].lastOffset < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(lb.all) && lb.all[lo].baseOffset <= off {
		return lb.all[lo], true
	}
	return logBatch{}, false
}

// siblingLog reads the batch headers of the .log an index belongs to.
func (d *dumper) siblingLog(path string, base record.Offset) (string, logBatches, bool) {
	logPath := layout.SegmentPath(filepath.Dir(path), base, layout.LogSuffix)
	batches, end, size, err := scanLog(logPath, nil)
	if errors.Is(err, os.ErrNotExist) {
		d.problem("%s: cannot verify: no %s beside it", path, filepath.Base(logPath))
		return "", logBatches{}, false
	}
	if err != nil && !errors.Is(err, record.ErrTruncated) && !errors.Is(err, record.ErrCorrupt) {
		d.problem("%s: cannot verify: %v", path, err)
		return "", logBatches{}, false
	}
	// A corrupt tail is reported by dumping the .log; the index is checked
	// against the valid batches.
	return logPath, logBatches{all: batches, end: end, size: size}, true
}
