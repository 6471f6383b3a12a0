package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/logfs/logfs/index"
	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/txn"
)

// This file is `logfs dump`, Kafka's kafka-dump-log.sh (DumpLogSegments)
// line for line. The lines and reports follow Kafka 3.7.1's
// core/src/main/scala/kafka/tools/DumpLogSegments.scala, the version of
// the newest fixtures; each function names the lines of that file it
// follows ("DLS:NN"). Kafka's tool dies with a stack trace on the files
// it cannot read (a batch smaller than a record, a missing .log beside an
// index, an index file not named by an offset); logfs says so in one line
// on stderr, goes on with the other files and exits 1. Whether an index
// entry is right is decided by package index's rule (index.Verifier), the
// one check and reads apply; Kafka's reports only give it their format.

func init() { addCommand(newDumpCommand) }

func newDumpCommand() *cobra.Command {
	var (
		d     dumper
		files string
	)
	cmd := &cobra.Command{
		Use:   "dump [--files FILE,…] [--deep-iteration] [--print-data-log] [--verify-index-only] [--index-sanity-check] [FILE…]",
		Short: "Decode segment files, as Kafka's kafka-dump-log.sh (DumpLogSegments)",
		Long: `Decode the files of a logfs or Kafka partition folder, with the flags and the
output of Kafka's kafka-dump-log.sh (DumpLogSegments, Kafka 3.7):

  .log         a line per batch ("baseOffset: … isvalid: true"); with
               --deep-iteration or --print-data-log a line per record
               ("| offset: …"), --print-data-log adding key and payload
  .index       "offset: N position: P" per entry, or "FILE is empty."
  .timeindex   "timestamp: T offset: N" per entry
  .txnindex    one line per aborted transaction
  .snapshot    one line per producer in a producer-state snapshot
  .checkpoint  a KRaft snapshot, dumped as a .log

Anything else is "Ignoring unknown file" on stderr. Files come from
--files (comma-separated) and the arguments.

After the files, on stderr and as Kafka prints them: index entries that do
not agree with their .log ("Mismatches in :FILE", "Found timestamp mismatch
in :FILE", "The following indexed offsets are not found in the log."), and
with --deep-iteration records whose offsets are not consecutive
("Non-consecutive offsets in FILE": compaction leaves these). An entry
agrees with the log under the rule every Kafka version's writers keep
(see logfs check), not only when it names its batch's last offset.

Unlike Kafka's tool, logfs exits 1 when anything is wrong: an invalid batch,
invalid bytes at the end of a .log, an index entry that disagrees, a file it
cannot read. Its own additions have their own flags: --verify checks whole
index files against their .log as logfs check does ("Verified N entries"),
--batch-details adds baseTimestamp, batchLength and attributes to batch
lines.`,
		Example: `  logfs dump --files logfs-data/orders-0/00000000000000000000.log
  logfs dump --print-data-log logfs-data/orders-0/*.log
  logfs dump --verify-index-only logfs-data/orders-0/*.index logfs-data/orders-0/*.timeindex`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var all []string
			if files != "" {
				// Kafka splits on commas and drops empty names at the end
				// (String.split); an empty one inside names no file.
				all = strings.Split(strings.TrimRight(files, ","), ",")
			}
			all = append(all, args...)
			if len(all) == 0 {
				return usageErrorf("missing FILE: give --files FILE,… or files as arguments (see %s --help)", cmd.CommandPath())
			}
			if d.maxMessageSize <= 0 || d.maxBytes <= 0 {
				return usageErrorf("--max-message-size and --max-bytes must be above 0")
			}
			if err := checkFilesExist(all); err != nil {
				return err // before anything is printed
			}
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 256<<10)
			d.out, d.errw = out, cmd.ErrOrStderr()
			d.cwd, _ = os.Getwd()
			d.deep = d.deep || d.printData
			for _, f := range all {
				d.dumpFile(f)
			}
			if err := out.Flush(); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			d.printReports()
			if d.failed {
				return silentError{exitFailure}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&files, "files", "", "the comma-separated `FILE,…` to dump (.log, .index, .timeindex, .txnindex, .snapshot, .checkpoint)")
	f.BoolVar(&d.deep, "deep-iteration", false, "print every record, not only every batch (implied by --print-data-log)")
	f.BoolVar(&d.printData, "print-data-log", false, "print each record's key and payload")
	f.BoolVar(&d.verifyOnly, "verify-index-only", false, "check index files against their .log without printing their entries")
	f.BoolVar(&d.sanityOnly, "index-sanity-check", false, "only check each index file's own structure (the check before an index is used), printing \"FILE passed sanity check.\"")
	f.IntVar(&d.maxMessageSize, "max-message-size", 5<<20, "the largest batch an index entry may name, in bytes")
	f.IntVar(&d.maxBytes, "max-bytes", math.MaxInt32, "dump at most this many bytes of each .log")
	f.BoolVar(&d.skipMeta, "skip-record-metadata", false, "leave out each record's offset, timestamp, sizes, sequence and header keys")
	f.BoolVar(&d.verify, "verify", false, "logfs: check each index file against its .log as logfs check does, saying \"Verified N entries\"")
	f.BoolVar(&d.details, "batch-details", false, "logfs: add baseTimestamp, batchLength and attributes to each batch line")
	f.BoolVarP(&d.printData, "print-data", "d", false, "the same as --print-data-log")
	f.MarkHidden("print-data")
	return cmd
}

// dumper dumps files and gathers Kafka's end-of-run reports.
type dumper struct {
	deep, printData, verifyOnly, sanityOnly, skipMeta bool
	maxMessageSize, maxBytes                          int
	verify, details                                   bool

	out, errw io.Writer
	cwd       string
	failed    bool
	dec       record.Decoder

	// The reports DumpLogSegments prints after the files (DLS:80-94), by
	// file in the order dumped (Kafka keeps them in hash maps, whose order
	// is not defined).
	offsetMismatches, timeMismatches, timeOutOfOrder, timeNotFound, nonConsecutive []report
}

// report is a list of pairs of offsets or timestamps about one file.
type report struct {
	file  string
	pairs [][2]int64
}

// problem says on stderr what could not be read, and makes the exit
// status 1.
func (d *dumper) problem(format string, args ...any) {
	d.flush()
	fmt.Fprintf(d.errw, "logfs dump: %s\n", fmt.Sprintf(format, args...))
	d.failed = true
}

// flush writes out what stdout holds, so that stdout and stderr stay in
// order on a terminal.
func (d *dumper) flush() {
	if f, ok := d.out.(*bufio.Writer); ok {
		f.Flush()
	}
}

// javaPath is how java.io.File prints a path: repeated separators
// collapsed and a trailing one dropped, nothing else resolved.
func javaPath(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// absPath is File.getAbsolutePath: the working directory joined to a
// relative path, unresolved.
func (d *dumper) absPath(p string) string {
	if filepath.IsAbs(p) {
		return javaPath(p)
	}
	return javaPath(d.cwd + "/" + p)
}

// dumpFile dispatches on the suffix after the name's last dot (DLS:57-77):
// "x.log.deleted" is a ".deleted" file, which Kafka ignores.
func (d *dumper) dumpFile(arg string) {
	path := javaPath(arg)
	fmt.Fprintf(d.out, "Dumping %s\n", path)
	name := filepath.Base(path)
	suffix := ""
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		suffix = name[i:]
	}
	switch suffix {
	case layout.LogSuffix, kraftSnapshotSuffix:
		d.dumpLog(path)
	case layout.IndexSuffix:
		d.dumpIndex(path)
	case layout.TimeIndexSuffix:
		d.dumpTimeIndex(path)
	case layout.SnapshotSuffix:
		d.dumpProducerSnapshot(path)
	case layout.TxnIndexSuffix:
		d.dumpTxnIndex(path)
	default:
		d.flush()
		fmt.Fprintf(d.errw, "Ignoring unknown file %s\n", path)
	}
}

// fileOffset is the offset a file is named by: the part of its name
// before the first dot, as Kafka parses it (name.split("\\.")(0).toLong).
func fileOffset(path string) (record.Offset, bool) {
	name := filepath.Base(path)
	n, err := strconv.ParseInt(strings.SplitN(name, ".", 2)[0], 10, 64)
	return record.Offset(n), err == nil
}

// sibling is the file beside path with the same offset and suffix.
func sibling(path, suffix string) string {
	return filepath.Join(filepath.Dir(path), strings.SplitN(filepath.Base(path), ".", 2)[0]+suffix)
}

// KRaft snapshots (Snapshots.java): <end offset, 20 digits>-<epoch, 10
// digits>.checkpoint, and the bootstrap file of a KRaft controller.
const (
	kraftSnapshotSuffix = ".checkpoint"
	kraftBootstrapFile  = "bootstrap.checkpoint"
)

// dumpLog prints a .log or a KRaft snapshot (DLS:248-332): a line per
// batch, and with --deep-iteration a line per record.
func (d *dumper) dumpLog(path string) {
	name := filepath.Base(path)
	switch {
	case strings.HasSuffix(name, layout.LogSuffix):
		start, ok := fileOffset(path)
		if !ok {
			d.problem("%s: a .log is named by its base offset (00000000000000000000.log)", path)
			return
		}
		fmt.Fprintf(d.out, "Log starting offset: %d\n", start)
	case name == kraftBootstrapFile:
		fmt.Fprintln(d.out, "KRaft bootstrap snapshot")
	default:
		end, epoch, ok := parseKRaftSnapshotName(name)
		if !ok {
			d.problem("%s: a KRaft snapshot is named <end offset, 20 digits>-<epoch, 10 digits>.checkpoint", path)
			return
		}
		fmt.Fprintf(d.out, "Snapshot end offset: %d, epoch: %d\n", end, epoch)
	}
	f, err := os.Open(path)
	if err != nil {
		d.problem("%v", err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		d.problem("%v", err)
		return
	}
	size := st.Size()
	end := min(size, int64(d.maxBytes)) // FileRecords.slice(0, maxBytes)
	var rep report
	last := int64(-1)
	var valid int64
	var hdr [17]byte
	for {
		// FileLogInputStream.nextBatch: the offset, size and magic; fewer
		// than 17 bytes end the batches, as does a batch that runs past
		// the end; a size below a record's 14 bytes is Kafka's
		// CorruptRecordException.
		if end-valid < int64(len(hdr)) {
			break
		}
		if _, err := f.ReadAt(hdr[:], valid); err != nil {
			d.problem("%s: %v", path, err)
			return
		}
		length := int32(binary.BigEndian.Uint32(hdr[8:]))
		if length < 14 {
			d.problem("%s: found record size %d smaller than minimum record overhead (14) at position %d", path, length, valid)
			return
		}
		bsize := int64(length) + record.LogOverhead
		if valid+bsize > end {
			break
		}
		if magic := int8(hdr[16]); magic != record.Magic {
			d.problem("%s: batch at position %d has magic %d: the message formats before Kafka 0.11 (magic 0 and 1) are not supported", path, valid, magic)
			return
		}
		if bsize < record.HeaderSize {
			d.problem("%s: batch at position %d is %d bytes, below the %d-byte header", path, valid, bsize, record.HeaderSize)
			return
		}
		buf := make([]byte, bsize)
		if _, err := f.ReadAt(buf, valid); err != nil {
			d.problem("%s: %v", path, err)
			return
		}
		b := rawBatch(buf, record.Position(valid))
		d.printBatch(b, valid)
		if !b.valid() {
			d.failed = true
		}
		if d.deep && !d.printRecords(path, b, &last, &rep) {
			return
		}
		valid += bsize
	}
	if len(rep.pairs) > 0 {
		rep.file = d.absPath(path)
		d.nonConsecutive = append(d.nonConsecutive, rep)
	}
	if trailing := size - valid; trailing > 0 && d.maxBytes == math.MaxInt32 {
		fmt.Fprintf(d.out, "Found %d invalid bytes at the end of %s\n", trailing, name)
		d.failed = true
	}
}

// parseKRaftSnapshotName reads Snapshots.parse's name.
func parseKRaftSnapshotName(name string) (end int64, epoch int32, ok bool) {
	if len(name) < 31 || name[20] != '-' {
		return 0, 0, false
	}
	end, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	e, err := strconv.ParseInt(name[21:31], 10, 32)
	return end, int32(e), err == nil
}

// batch is a batch as DumpLogSegments prints it: the header's fields as
// they are, checked by nothing but isvalid.
type batch struct {
	record.Batch
}

// rawBatch is b with its header fields as they are (record.HeaderFields),
// as DefaultRecordBatch reads them.
func rawBatch(b []byte, pos record.Position) *batch {
	return &batch{record.Batch{Pos: pos, Bytes: b, BatchHeader: record.HeaderFields(b)}}
}

// valid is DefaultRecordBatch.isValid: the size and the CRC-32C.
func (b *batch) valid() bool { return b.Verify() == nil }

// incrementSequence is DefaultRecordBatch.incrementSequence: sequences
// wrap from MaxInt32 to 0.
func incrementSequence(seq, by int32) int32 {
	if seq > math.MaxInt32-by {
		return by - (math.MaxInt32 - seq) - 1
	}
	return seq + by
}

func timestampType(a record.Attributes) string {
	if a.LogAppendTime() {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// printBatch is printBatchLevel for magic 2 (DLS:334-347).
func (d *dumper) printBatch(b *batch, position int64) {
	h := &b.BatchHeader
	lastSeq := int32(-1)
	if h.BaseSequence != -1 {
		lastSeq = incrementSequence(h.BaseSequence, h.LastOffsetDelta)
	}
	horizon := "OptionalLong.empty"
	if h.Attributes.DeleteHorizon() {
		horizon = "OptionalLong[" + strconv.FormatInt(h.BaseTimestamp, 10) + "]"
	}
	fmt.Fprintf(d.out, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d "+
		"partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d "+
		"compresscodec: %s crc: %d isvalid: %t",
		h.BaseOffset, h.LastOffset(), h.RecordCount, h.BaseSequence, lastSeq, h.ProducerID, h.ProducerEpoch,
		h.PartitionLeaderEpoch, h.Attributes.Transactional(), h.Attributes.Control(), horizon, position,
		timestampType(h.Attributes), h.MaxTimestamp, h.Size(), h.Magic, h.Attributes.Compression(), h.CRC, b.valid())
	if d.details {
		fmt.Fprintf(d.out, " baseTimestamp: %d batchLength: %d attributes: %d", h.BaseTimestamp, h.Length, h.Attributes)
	}
	fmt.Fprintln(d.out)
}

// printRecords prints the records of b (DLS:273-324) and notes offsets
// that do not follow the one before, from *last on. It reports false when
// the records cannot be decoded.
func (d *dumper) printRecords(path string, b *batch, last *int64, rep *report) bool {
	h := &b.BatchHeader
	if h.Attributes.Compression() > record.Zstd {
		d.problem("%s: batch at position %d: unknown compression type id %d", path, b.Pos, h.Attributes.Compression())
		return false
	}
	it, err := d.dec.Records(&b.Batch)
	if err != nil {
		d.problem("%v", record.WithFile(err, path))
		return false
	}
	for it.Next() {
		r := it.Record()
		off := int64(r.Offset)
		if *last != -1 && off != *last+1 {
			rep.pairs = append(rep.pairs, [2]int64{*last, off})
		}
		*last = off
		prefix := "| "
		var line strings.Builder
		if !d.skipMeta {
			seq := int32(-1)
			if h.BaseSequence >= 0 {
				seq = incrementSequence(h.BaseSequence, int32(r.Offset-h.BaseOffset))
			}
			keys := make([]string, len(r.Headers))
			for i, hd := range r.Headers {
				keys[i] = javaString(hd.Key)
			}
			fmt.Fprintf(&line, "%soffset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
				prefix, r.Offset, timestampType(h.Attributes), r.Timestamp, size(r.Key), size(r.Value), seq, strings.Join(keys, ","))
			prefix = " "
			if h.Attributes.Control() {
				s, err := controlRecord(r)
				if err != nil {
					d.out.Write([]byte(line.String()))
					fmt.Fprintln(d.out)
					d.problem("%s: control record at offset %d: %v", path, r.Offset, err)
					return false
				}
				line.WriteString(s)
			}
		}
		if d.printData && !h.Attributes.Control() {
			if r.Key != nil {
				fmt.Fprintf(&line, "%skey: %s", prefix, javaString(r.Key))
			}
			if r.Value != nil {
				fmt.Fprintf(&line, " payload: %s", javaString(r.Value))
			}
		}
		line.WriteByte('\n')
		io.WriteString(d.out, line.String())
	}
	if err := it.Err(); err != nil {
		d.problem("%v", record.WithFile(err, path))
		return false
	}
	return true
}

// size is a key's or value's length, -1 for null (Record.keySize).
func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// controlRecord describes a control record as DLS:298-313 does: a
// transaction marker, a KRaft snapshot's header or footer as JSON, or the
// type's name and number.
func controlRecord(r *record.Record) (string, error) {
	typ, err := record.ParseControlKey(r.Key)
	if err != nil {
		return "", err
	}
	switch typ {
	case record.ControlAbort, record.ControlCommit:
		epoch, err := record.ParseMarkerValue(r.Value)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf(" endTxnMarker: %v coordinatorEpoch: %d", typ, epoch), nil
	case record.ControlSnapshotHeader:
		// SnapshotHeaderRecord, a flexible version 0 message: version
		// int16, lastContainedLogTimestamp int64, tagged fields.
		if len(r.Value) < 10 {
			return "", fmt.Errorf("snapshot header of %d bytes", len(r.Value))
		}
		return fmt.Sprintf(` SnapshotHeader {"version":%d,"lastContainedLogTimestamp":%d}`,
			int16(binary.BigEndian.Uint16(r.Value)), int64(binary.BigEndian.Uint64(r.Value[2:]))), nil
	case record.ControlSnapshotFooter:
		if len(r.Value) < 2 {
			return "", fmt.Errorf("snapshot footer of %d bytes", len(r.Value))
		}
		return fmt.Sprintf(` SnapshotFooter {"version":%d}`, int16(binary.BigEndian.Uint16(r.Value))), nil
	}
	n := int16(binary.BigEndian.Uint16(r.Key[2:]))
	if !typ.Known() {
		typ = record.ControlUnknown
	}
	return fmt.Sprintf(" controlType: %v(%d)", typ, n), nil
}

// javaString is new String(bytes, UTF-8), as Kafka's StringDecoder makes
// keys and payloads: the bytes as they are, each maximal ill-formed
// subsequence replaced by U+FFFD as Java's decoder replaces it.
func javaString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			s.WriteByte(c)
			i++
			continue
		}
		n, lo, hi := 0, byte(0x80), byte(0xbf) // continuation bytes; lo and hi bound the first
		switch {
		case c >= 0xc2 && c <= 0xdf:
			n = 2
		case c == 0xe0:
			n, lo = 3, 0xa0
		case c == 0xed:
			n, hi = 3, 0x9f
		case c >= 0xe1 && c <= 0xef:
			n = 3
		case c == 0xf0:
			n, lo = 4, 0x90
		case c == 0xf4:
			n, hi = 4, 0x8f
		case c >= 0xf1 && c <= 0xf3:
			n = 4
		}
		k := 1
		for ; n > 0 && k < n && i+k < len(b); k++ {
			x := b[i+k]
			if k == 1 && (x < lo || x > hi) || k > 1 && (x < 0x80 || x > 0xbf) {
				break
			}
		}
		if n > 0 && k == n {
			s.Write(b[i : i+n])
		} else {
			s.WriteRune(utf8.RuneError)
		}
		i += k
	}
	return s.String()
}

// readIndexFile reads an index file as Kafka maps it: its whole entries
// (a shorter tail is not one), and its segment's base offset from its
// name.
func (d *dumper) readIndexFile(path string) (data []byte, base record.Offset, ok bool) {
	base, ok = fileOffset(path)
	if !ok {
		d.problem("%s: an index file is named by its segment's base offset (00000000000000000000%s)", path, filepath.Ext(path))
		return nil, 0, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem("%v", err)
		return nil, 0, false
	}
	return data, base, true
}

// segmentLog reads the batch headers of the .log beside an index file.
func (d *dumper) segmentLog(path string) (logBatches, bool) {
	logPath := sibling(path, layout.LogSuffix)
	batches, end, size, err := scanLog(logPath)
	if errors.Is(err, os.ErrNotExist) {
		d.problem("%s: no %s beside it to check it against", path, filepath.Base(logPath))
		return logBatches{}, false
	}
	if err != nil && !errors.Is(err, record.ErrTruncated) && !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, record.ErrUnsupportedMagic) {
		d.problem("%s: %v", logPath, err)
		return logBatches{}, false
	}
	// A bad or torn tail is reported when the .log is dumped; the index is
	// checked against the batches before it.
	return logBatches{path: logPath, all: batches, end: end, size: size}, true
}

// dumpIndex prints an offset index (DLS:125-164): "FILE is empty.", or
// with --index-sanity-check whether it passes, or its entries up to a
// zero tail; entries that disagree with the log are reported at the end.
func (d *dumper) dumpIndex(path string) {
	data, base, ok := d.readIndexFile(path)
	if !ok {
		return
	}
	n := len(data) / index.OffsetEntrySize
	if n == 0 {
		fmt.Fprintf(d.out, "%s is empty.\n", path)
		if d.verify {
			if log, ok := d.segmentLog(path); ok {
				d.verifyAll(path, 0, log)
			}
		}
		return
	}
	log, haveLog := d.segmentLog(path)
	if d.sanityOnly {
		logSize := record.Position(-1)
		if haveLog {
			logSize = log.size
		}
		if _, err := index.DecodeOffsetEntries(path, data, base, logSize); err != nil {
			d.problem("%v", err)
			return
		}
		fmt.Fprintf(d.out, "%s passed sanity check.\n", path)
		return
	}
	for i := 0; i < n; i++ {
		e := data[i*index.OffsetEntrySize:]
		rel, pos := binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
		if rel == 0 && i > 0 {
			break // the zero tail of a preallocated file (DLS:150-152)
		}
		if !d.verifyOnly {
			fmt.Fprintf(d.out, "offset: %d position: %d\n", base+record.Offset(rel), pos)
		}
	}
	if !haveLog {
		return
	}
	off, err := index.DecodeOffsetEntries(path, data, base, log.size)
	if err != nil {
		d.problem("%v", err)
		return
	}
	v := d.verifier(path, off, "", nil, log)
	offFaults, _ := v.Faults()
	if len(offFaults) > 0 {
		rep := report{file: d.absPath(path)}
		for _, i := range offFaults {
			rep.pairs = append(rep.pairs, [2]int64{int64(off[i].Offset), int64(log.lastAt(off[i].Pos, d.maxMessageSize))})
		}
		d.offsetMismatches = append(d.offsetMismatches, rep)
		d.failed = true
	}
	if d.verify {
		d.verifyAll(path, len(off), log)
	}
}

// dumpTimeIndex prints a time index (DLS:167-224): with
// --index-sanity-check whether it passes, else its entries up to a zero
// tail; entries that disagree with the log are reported at the end.
func (d *dumper) dumpTimeIndex(path string) {
	data, base, ok := d.readIndexFile(path)
	if !ok {
		return
	}
	offPath := sibling(path, layout.IndexSuffix)
	offData, err := os.ReadFile(offPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		d.problem("%v", err)
		return
	}
	log, haveLog := d.segmentLog(path)
	logSize := record.Position(-1)
	if haveLog {
		logSize = log.size
	}
	off, _ := index.DecodeOffsetEntries(offPath, offData, base, logSize) // a bad one is reported when it is dumped
	if d.sanityOnly {
		if _, err := index.DecodeTimeEntries(path, data, base, off); err != nil {
			d.problem("%v", err)
			return
		}
		fmt.Fprintf(d.out, "%s passed sanity check.\n", path)
		return
	}
	n := len(data) / index.TimeEntrySize
	for i := 0; i < n; i++ {
		e := data[i*index.TimeEntrySize:]
		ts, rel := int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
		if rel == 0 && i > 0 {
			break // the zero tail (DLS:190-192)
		}
		if !d.verifyOnly {
			fmt.Fprintf(d.out, "timestamp: %d offset: %d\n", ts, base+record.Offset(rel))
		}
	}
	if !haveLog {
		return
	}
	tim, err := index.DecodeTimeEntries(path, data, base, off)
	if err != nil {
		// Kafka reports one broken rule of the entries alone: timestamps
		// that do not increase.
		d.problem("%v", err)
		if r := outOfOrder(data); len(r.pairs) > 0 {
			r.file = d.absPath(path)
			d.timeOutOfOrder = append(d.timeOutOfOrder, r)
		}
		return
	}
	v := d.verifier("", nil, path, tim, log)
	_, timeFaults := v.Faults()
	var mismatch, notFound report
	for _, j := range timeFaults {
		e := tim[j]
		b, held := log.holding(e.Offset)
		if !held {
			notFound.pairs = append(notFound.pairs, [2]int64{int64(e.Offset), -1})
			continue
		}
		if b.lastOffset != e.Offset && log.maxUpTo(e.Offset) == e.Timestamp {
			// The timestamp is right; Kafka's tool looks for it at the
			// last offset of its batch only.
			notFound.pairs = append(notFound.pairs, [2]int64{int64(e.Offset), int64(b.lastOffset)})
			continue
		}
		mismatch.pairs = append(mismatch.pairs, [2]int64{e.Timestamp, log.maxUpTo(e.Offset)})
	}
	if len(mismatch.pairs) > 0 {
		mismatch.file = d.absPath(path)
		d.timeMismatches = append(d.timeMismatches, mismatch)
	}
	if len(notFound.pairs) > 0 {
		notFound.file = d.absPath(path)
		d.timeNotFound = append(d.timeNotFound, notFound)
	}
	d.failed = d.failed || len(timeFaults) > 0
	if d.verify {
		d.verifyAll(path, len(tim), log)
	}
}

// outOfOrder lists the time entries whose timestamp is not above the one
// before, with it, as Kafka's tool reports them (DLS:212-213), up to the
// zero tail: the details of an index that breaks the rule.
func outOfOrder(data []byte) report {
	var r report
	prev := record.NoTimestamp
	for i := 0; i+index.TimeEntrySize <= len(data); i += index.TimeEntrySize {
		ts, rel := int64(binary.BigEndian.Uint64(data[i:])), binary.BigEndian.Uint32(data[i+8:])
		if rel == 0 && i > 0 {
			break
		}
		if prev >= ts {
			r.pairs = append(r.pairs, [2]int64{ts, prev})
		}
		prev = ts
	}
	return r
}

// verifier runs index.Verifier over the log's batches: the offset
// entries (timePath "") or the time entries, not as a sealed segment's
// (the final-entry rule is --verify's).
func (d *dumper) verifier(offPath string, off []index.OffsetEntry, timePath string, tim []index.TimeEntry, log logBatches) *index.Verifier {
	v := index.NewVerifier(offPath, off, timePath, tim, 0)
	for _, b := range log.all {
		v.Batch(index.Batch{Pos: b.pos, Base: b.baseOffset, Last: b.lastOffset, MaxTimestamp: b.maxTimestamp})
	}
	if log.end < log.size {
		v.Stop()
	}
	v.Finish(false, math.MaxInt)
	return v
}

// verifyAll is --verify: the whole rule, the final time entry of a sealed
// segment's index included (one without a zero tail), each broken entry
// on a line of its own, or "Verified N entries of FILE against LOG".
func (d *dumper) verifyAll(path string, entries int, log logBatches) {
	errs := verifyIndexFile(path, log)
	for _, err := range errs {
		d.problem("%v", err)
	}
	if len(errs) == 0 {
		fmt.Fprintf(d.out, "Verified %d entries of %s against %s\n", entries, filepath.Base(path), filepath.Base(log.path))
	}
}

// verifyIndexFile checks an offset or time index file against the
// batches of its log with index.Verifier, as storage's Check does.
func verifyIndexFile(path string, log logBatches) []error {
	base, _ := fileOffset(path)
	offPath := path
	timed := filepath.Ext(path) == layout.TimeIndexSuffix
	if timed {
		offPath = sibling(path, layout.IndexSuffix)
	}
	offData, err := os.ReadFile(offPath)
	if err != nil && (!timed || !errors.Is(err, os.ErrNotExist)) {
		return []error{err}
	}
	off, offErr := index.DecodeOffsetEntries(offPath, offData, base, log.size)
	v := index.NewVerifier(offPath, off, "", nil, 0)
	sealed := false
	if timed {
		timeData, err := os.ReadFile(path)
		if err != nil {
			return []error{err}
		}
		tim, err := index.DecodeTimeEntries(path, timeData, base, off)
		if err != nil {
			return []error{err}
		}
		// A zero tail: an active segment's preallocated file.
		sealed = len(tim)*index.TimeEntrySize == len(timeData) && timeIndexSealed(path, base)
		v = index.NewVerifier(offPath, nil, path, tim, 0)
	} else if offErr != nil {
		return []error{offErr}
	}
	for _, b := range log.all {
		v.Batch(index.Batch{Pos: b.pos, Base: b.baseOffset, Last: b.lastOffset, MaxTimestamp: b.maxTimestamp})
	}
	if log.end < log.size {
		v.Stop()
	}
	return v.Finish(sealed, 100)
}

// timeIndexSealed applies index.Sealed to the time index at path of the
// segment at base, as storage's Check does for an open log: its segment is
// not the last .log of its partition folder, or the data directory above
// the folder was shut down cleanly (.kafka_cleanshutdown; nothing appends
// while a tool reads it offline). A file dumped alone, with no .log after
// it and no marker, is judged as an active segment's.
func timeIndexSealed(path string, base record.Offset) bool {
	dir := filepath.Dir(path)
	last := true
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if b, suffix, ok := layout.ParseSegmentFileName(e.Name()); ok && suffix == layout.LogSuffix && b > base {
				last = false
				break
			}
		}
	}
	_, err := os.Stat(filepath.Join(filepath.Dir(dir), layout.CleanShutdownFile))
	return index.Sealed(last, err == nil)
}

// dumpTxnIndex prints a .txnindex (DLS:97-103).
func (d *dumper) dumpTxnIndex(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem("%v", err)
		return
	}
	entries, err := txn.ParseIndex(data)
	for _, a := range entries {
		fmt.Fprintf(d.out, "version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n",
			a.Version, a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
	}
	if err != nil {
		d.problem("%s: %v", path, err)
	}
}

// dumpProducerSnapshot prints a producer snapshot (DLS:105-121): a line
// per producer, its last batch's metadata when it wrote one; a corrupt
// snapshot is Kafka's CorruptSnapshotException message on stderr.
func (d *dumper) dumpProducerSnapshot(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		d.problem("%v", err)
		return
	}
	entries, err := txn.ParseSnapshot(data)
	var se *txn.SnapshotError
	if errors.As(err, &se) {
		d.flush()
		fmt.Fprintln(d.errw, se.Message) // as Kafka prints it
		d.failed = true
		return
	}
	for _, e := range entries {
		first := "OptionalLong.empty"
		if e.CurrentTxnFirstOffset >= 0 {
			first = "OptionalLong[" + strconv.FormatInt(int64(e.CurrentTxnFirstOffset), 10) + "]"
		}
		fmt.Fprintf(d.out, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d ",
			e.ProducerID, e.ProducerEpoch, e.CoordinatorEpoch, first, e.Timestamp)
		if e.LastOffset >= 0 {
			fmt.Fprintf(d.out, "firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d",
				e.FirstSequence(), e.LastSequence, e.LastOffset, e.OffsetDelta, e.Timestamp)
		}
		fmt.Fprintln(d.out)
	}
}

// printReports prints what DumpLogSegments prints after the files
// (DLS:80-94, 375-400): offset-index mismatches, time-index errors, then
// non-consecutive offsets. Kafka prepends to the lists of the first and
// the last (Scala's ::=), so they come out last found first; the time
// index's lists keep their order.
func (d *dumper) printReports() {
	w := d.errw
	for _, r := range d.offsetMismatches {
		fmt.Fprintf(w, "Mismatches in :%s\n", r.file)
		for i := len(r.pairs) - 1; i >= 0; i-- {
			fmt.Fprintf(w, "  Index offset: %d, log offset: %d\n", r.pairs[i][0], r.pairs[i][1])
		}
	}
	for _, r := range d.timeMismatches {
		fmt.Fprintf(w, "Found timestamp mismatch in :%s\n", r.file)
		for _, p := range r.pairs {
			fmt.Fprintf(w, "  Index timestamp: %d, log timestamp: %d\n", p[0], p[1])
		}
	}
	for _, r := range d.timeOutOfOrder {
		fmt.Fprintf(w, "Found out of order timestamp in :%s\n", r.file)
		for _, p := range r.pairs {
			fmt.Fprintf(w, "  Index timestamp: %d, Previously indexed timestamp: %d\n", p[0], p[1])
		}
	}
	for _, r := range d.timeNotFound {
		fmt.Fprintln(w, "The following indexed offsets are not found in the log.")
		for _, p := range r.pairs {
			fmt.Fprintf(w, "Indexed offset: %d, found log offset: %d\n", p[0], p[1])
		}
	}
	for _, r := range d.nonConsecutive {
		fmt.Fprintf(w, "Non-consecutive offsets in %s\n", r.file)
		for i := len(r.pairs) - 1; i >= 0; i-- {
			fmt.Fprintf(w, "  %d is followed by %d\n", r.pairs[i][0], r.pairs[i][1])
		}
	}
}

// logBatch is what the index checks need to know of a batch.
type logBatch struct {
	pos                    record.Position
	size                   int64
	baseOffset, lastOffset record.Offset
	maxTimestamp           int64
}

// logBatches are the batches of a .log, in order.
type logBatches struct {
	path string
	all  []logBatch
	end  record.Position // where the valid batches end
	size record.Position
}

// scanLog reads the batch headers of a .log. It returns the batches, the
// position where they end and the file's size, and the error that stopped
// the scan.
func scanLog(path string) (batches []logBatch, end, size record.Position, err error) {
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
	sc := record.NewScanner(f, 0, size, record.ScanOptions{HeadersOnly: true})
	for sc.Next() {
		b := sc.Batch()
		batches = append(batches, logBatch{pos: b.Pos, size: b.Size(), baseOffset: b.BaseOffset, lastOffset: b.LastOffset(), maxTimestamp: b.MaxTimestamp})
	}
	return batches, sc.Pos(), size, record.WithFile(sc.Err(), path)
}

// lastAt returns the last offset of the batch that starts at pos, as
// Kafka's tool reads it (the first batch of a slice of max bytes from
// pos), or -1 when none starts there or it is larger.
func (lb logBatches) lastAt(pos record.Position, max int) record.Offset {
	for _, b := range lb.all {
		if b.pos == pos && b.size <= int64(max) {
			return b.lastOffset
		}
	}
	return -1
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

// maxUpTo returns the largest batch max timestamp of the batches up to
// the one holding off: what a time index entry for off should say.
func (lb logBatches) maxUpTo(off record.Offset) int64 {
	m := record.NoTimestamp
	for _, b := range lb.all {
		if b.baseOffset > off {
			break
		}
		m = max(m, b.maxTimestamp)
	}
	return m
}
