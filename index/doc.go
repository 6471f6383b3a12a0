// Package index reads and writes a segment's sparse indexes, the .index
// (offset) and .timeindex (time) files, byte for byte as Apache Kafka lays
// them out. Readers search them through read-only memory mappings; every
// byte reaches a file with pwrite through package vfs, never through a
// mapping, so that a full disk is an error (ENOSPC) from the write that
// needed the room, not a SIGBUS from a store into a page that has no block
// behind it. It owns every mmap in logfs.
//
// # Entry layout
//
// An index file is an array of fixed-size entries with no header, no
// checksum and no padding. Integers are big-endian. Offsets are stored
// relative to the segment's base offset (the number in the file name), so
// a relative offset is in [0, MaxInt32].
//
// Offset index (.index), 8 bytes an entry:
//
//	 0                 4                 8
//	+-----------------+-----------------+
//	| relative offset | position        |
//	| uint32          | uint32          |
//	+-----------------+-----------------+
//
// The batch whose last offset is base+relative offset starts at byte
// position of the .log. Entries are sparse: storage adds one when more than
// index.interval.bytes (4096) of log were written since the last, and never
// for the first batch of a segment, so no entry has position 0.
//
// Time index (.timeindex), 12 bytes an entry:
//
//	 0                                   8                 12
//	+-----------------------------------+-----------------+
//	| timestamp (ms since the epoch)    | relative offset |
//	| int64                             | uint32          |
//	+-----------------------------------+-----------------+
//
// An entry (T, O) says that T is the largest timestamp up to the batch
// whose last offset is O, so any record stamped after T is at an offset
// after O. Timestamps strictly increase, offsets do not decrease.
//
// # Lookup
//
// Lookup returns the entry with the largest key (offset, or timestamp) <=
// the target; with none, (base, 0) for the offset index and (-1, base)
// for the time index. The search is Kafka's (KAFKA-6432): the last 8 KiB of
// entries (1024 offset entries, 682 time entries) are the warm section,
// searched first when the target is above its first entry, so that the
// lookups of consumers near the end of the log touch only pages that
// every lookup touches and that therefore stay in memory. Within a
// section it halves the range from the upper middle like Kafka, but with
// a conditional move instead of a branch and without stopping early on an
// exact match; keys strictly increase, so the answer is the same. In the
// cold section each step also loads the two entries the next step may
// probe, so that the cache misses of a search overlap instead of waiting
// for one another.
//
// # Lifecycle
//
//	CreateOffsetIndex / CreateTimeIndex     new active segment
//	    file truncated to nothing; the capacity, MaxBytes (10 MiB by
//	    default, rounded down to a multiple of the entry size), mapped
//	    read-only past the end of the file. Nothing is preallocated.
//	Append / MaybeAppend ...                entries kept in a page of
//	                                        memory, written with one
//	                                        pwrite per page
//	WritePending                            the page written now
//	Flush                                   the page written, fdatasync
//	Seal                                    roll: the page written, mapped
//	                                        entries only, read-only
//	Close                                   the page written if writable,
//	                                        unmapped, file closed;
//	                                        idempotent
//
//	OpenOffsetIndex / OpenTimeIndex         existing file of a sealed segment
//	    nothing mapped, nothing read: the first Lookup, Entry, Entries,
//	    Check, ... maps the file read-only and validates it (KAFKA-7283,
//	    with the lock and double check of KAFKA-9156), so opening a
//	    partition of thousands of segments maps nothing. Close, Rename and
//	    Delete never map (KAFKA-9373).
//	OpenXIndex with Options.Writable        existing file of the active segment
//	    validated now, then takes appends after its entries up to its
//	    capacity (KAFKA-6388: a trimmed index reopened as active must not
//	    look full).
//
// An empty file is never mapped for reading (mmap rejects length 0): it is
// an index with no entries. The file of a writable index holds exactly the
// entries written to it; the newest (up to a page of them) may still be in
// memory, where readers see them too. A writable index keeps its file open;
// a sealed one keeps it until the next Flush and then only its mapping;
// one never used keeps nothing.
//
// Durability: entries reach the disk with Flush. Close and Seal write what
// is pending but do not sync. After a crash the active index may lack its
// newest entries or end in a torn one; recovery rebuilds the indexes of
// the segments it replays from the log anyway. Creating a file is durable
// once storage syncs the directory.
//
// A full disk: Append and MaybeAppend fail with the file system's error
// when the page they complete cannot be written, and change nothing (the
// entries stay in memory and the next write tries again); Seal, Flush and
// WritePending likewise. TruncateTo and TruncateEntries cut the file
// (which never needs room) and take back entries still in memory.
//
// # Validation
//
// Kafka trusts an index file's length and, since KAFKA-7283, does not check
// indexes at startup. KAFKA-7076, KAFKA-10207, KAFKA-12734 and KAFKA-19200
// were all an untrimmed or otherwise wrong file that was believed: zero
// entries taken for real ones, a last timestamp of 0 taken for the
// segment's newest, a full-looking index overrun at the next append. Here
// the rules are written once, in check.go, and every file is judged by
// them wherever it is used.
//
// The structural rules run over the entries alone when a file is first
// mapped, on every open path, in one pass with no allocation, and Check
// runs them again. A tail of all-zero entries ends the entries (an
// untrimmed, preallocated file, as Kafka's active segment leaves it: the
// zeros are never taken for entries). The file is corrupt when:
//
//   - its length is not a multiple of the entry size;
//   - an all-zero entry is followed by one that is not;
//   - a relative offset is outside [0, MaxInt32];
//   - offset index: an entry has position 0 (Kafka never indexes position
//     0); relative offsets or positions do not strictly increase; a
//     position is at or past the end of the log (Options.LogSize, when
//     known: positions point at batch starts, so even a position equal to
//     the size is out);
//   - time index: a timestamp is negative (Kafka appends only timestamps
//     above -1), timestamps do not strictly increase, or offsets decrease.
//
// A reader that sees only the first LogSize bytes of a log that a writer
// in another process is still appending to (Options.Growing: a read-only
// storage log's last segment) maps the file after the writer wrote entries
// for batches past them. When the log has grown, positions are judged
// against its size then, and the entries past what the reader sees (offset
// entries at or past LogSize, time entries at or past Options.LogEnd) are
// left out as a zero tail is; when it has not, they break the rules.
//
// The rule against the log (Verifier) is the one every Kafka writer since
// 0.10.1 keeps, and logfs's own: an offset entry (K, P) points at the start
// of a batch B with base(B) <= K <= the last offset before the next entry's
// position (Kafka 0.10-1.1 key an entry by the first offset of an append,
// 2.0-3.9 by its largest, 4.0 by each batch's last); a time entry (T, O)
// holds the largest timestamp up to O, first reached at or after where a
// lookup of O starts; a sealed segment's time index ends with the
// segment's largest timestamp (Sealed says which are sealed: every segment
// but the last, and the last after a clean shutdown; after a crash the
// active segment's lacks that entry, as Kafka leaves it). Storage's Check, `logfs dump --verify` and
// recovery run it over every entry; storage runs it over the last entries
// when it first uses a segment's indexes; lookups check the entry they use
// against the batches they walk (CheckEntryStart, TimeEntryScan). Files
// that keep the rule are used and never rewritten.
//
// A corrupt index reports a *CorruptError, which unwraps to ErrCorrupt,
// from every call that reads it (a writable Open returns it). Indexes are
// derived data: storage falls back to scanning the log, and recovery
// rebuilds the files from the log (Create, append every batch, Seal).
//
// # Concurrency
//
// Readers: Lookup, LookupSpan, Entry, Entries, LastEntry, IsFull,
// MaxEntries, Check, CheckLogSize, Flush, Path, Base and Mapped. Any number of goroutines may
// call them at any time, concurrently with one another and with the
// writer. A reader racing with Close or Delete returns ErrClosed.
//
// Writers: Append, MaybeAppend, WritePending, Reset, TruncateTo,
// TruncateEntries, Seal, Flush of a writable index, Close, Rename and
// Delete. They belong to the segment's owner, which calls them one at a
// time (storage does, under its partition lock). Append and MaybeAppend
// take no lock at all, which is what keeps an append at a few
// nanoseconds, so calling one while another writer runs is a bug in the
// caller: both may write the page of pending entries. The other writers
// take the writer mutex, which makes them safe with one another and with a
// reader's first use of a lazily opened index. Flush of a sealed index may
// run at any time.
//
// Two locks, taken in this order:
//
//  1. wmu, the writer mutex, held by Reset, TruncateTo, Seal, Close,
//     Rename and Delete for their whole run, and by the first use of a
//     lazily opened index, which maps it (the double check of KAFKA-9156);
//  2. mu, an RWMutex guarding the mapping. Readers hold it shared while
//     they read mapped bytes, and it is the only lock on the lookup path;
//     remap, unmap, truncation and Reset hold it exclusively, so munmap
//     never runs under a reader.
//
// An append writes the entry's bytes into the page of pending entries
// past the published ones, then publishes the new count with an atomic
// store. Readers load the page and its count atomically, under mu, so they
// see either the old count or the new one with the entry's bytes complete.
// When the page is full the append writes it to the file first and only
// then publishes a new, empty page whose entries follow the written ones:
// a reader reads from the mapping only entries that are in the file, and
// a page it loaded is never written again.
//
// # Mapped logs
//
// LogMap maps a segment's .log read-only for storage's lookups: a lookup
// walks batch headers in the mapping (FindBatch) and copies out the one
// batch it wants, with no system call. Streaming reads stay with pread,
// which leaves no page mapped and keeps the kernel's read-ahead. Storage
// maps a sealed segment as the file is, and the active one out to
// segment.bytes, past the end of the file, so that appends show through
// without a remap; it never reads past the published size, and unmaps once
// the segment is deleted or closed and its last reader has let go. A
// mapped file that another process shortens would kill the process with
// SIGBUS: reads run with debug.SetPanicOnFault and return ErrFault instead.
//
// Mapped bytes never leave the package: entries are decoded with
// encoding/binary and returned as values, log bytes are copied out. While
// an index is open its file belongs to it: another process truncating a
// mapped file makes a reader fault (SIGBUS).
package index
