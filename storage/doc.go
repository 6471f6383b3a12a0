// Package storage is logfs's commit log: topics of partitions of segments
// in a data directory laid out exactly as Apache Kafka lays it out (see
// package layout), so that Kafka's own tools and logfs read each other's
// data.
//
// # Usage
//
//	l, err := storage.Open("logfs-data", storage.Options{})
//	t, err := l.CreateTopic("orders", 1, nil)
//	p, err := t.Partition(0)
//	first, err := p.Append([]storage.Record{{Value: []byte("hello")}})
//	err = p.Sync()                      // durable now
//	r, err := p.NewReader(first)        // records from an offset on
//	off, err := p.OffsetForTime(ts)     // Kafka's offsetsForTimes
//	v, err := p.NewView(storage.Values, off) // rendered bytes, random access
//	err = l.Close()                     // clean shutdown
//
// # Segments
//
// A partition is a sorted list of segments; the last one takes appends.
// An append (Partition.Append, or AppendValues for records that are a
// value only) is atomic: its records go down as one
// RecordBatch v2 (package record), or as several consecutive ones when one
// would not fit max.message.bytes or segment.bytes, each written with one
// pwrite at the end of the active .log, rolling as it must; readers see
// them only once all are down (the published sizes, segment list and log
// end move together, at the end), and on any error everything the append
// wrote is taken back: the log cut, index entries dropped, rolled segments
// deleted (see appendTx). An offset-index and a time-index entry are added
// when more than index.interval.bytes of log lie since the last entry,
// keyed by the batch's last offset at the batch's start, as Kafka does. A
// segment rolls before a batch when it would not fit in segment.bytes,
// when its first batch is older than segment.ms, when an index is full, or
// when an offset would overflow a relative offset; the old segment gets its
// final time-index entry and trimmed indexes and is flushed in the
// background.
//
// # Reading
//
// A read by offset finds the segment by binary search over base offsets,
// looks the offset up in its memory-mapped index, and walks batch headers
// from there to the first batch whose last offset reaches it. A read by
// time picks the first segment whose max timestamp reaches the target, then
// its time index, its offset index, and a scan, as Kafka's offsetsForTimes.
// Control batches are skipped by record readers and views.
//
// Lookups read a segment's .log through a read-only mapping
// (index.LogMap), made when the segment is first looked up in and dropped
// with its last reference: a lookup walks the batch headers in the mapping
// and copies out only the batch it returns, with no system call, which
// takes a random lookup from about 3 us to 1. Streaming reads use pread (a
// Reader once its reads grow past 128 KiB, a View always), so that they
// keep the kernel's read-ahead and leave no pages mapped (see
// mappedReadMax). The active segment is mapped out to segment.bytes so
// appends need no remap; a file that cannot be mapped is read with pread.
//
// A View renders records (Values: value and '\n'; JSONL: one object per
// line) from an offset on, with an exact size and reads at any position.
// Each segment keeps, per format, a sparse view index of rendered positions
// (an entry every 8 KiB of rendering); the values one is kept by the
// appender and stored in <base>.viewindex when the segment seals or the log
// closes, others are built on first use. The partition keeps the final
// rendered size of each sealed segment, per format, as prefix sums, once a
// view has summed it (viewsizes.go): a view's size, and where a read at any
// position lands, then cost a binary search plus the newest segment, not a
// pass over every segment after the start; Partition.ViewSize (a stat)
// pins only the first segment and the newest. Bad bytes found anywhere in
// a topic make the cached sizes stale (Topic.holes), and so does a hole of
// a gapless partition (offsets missing: a view stops there as at bad
// bytes); a segment with either is never among the cached sizes.
//
// # Transactions
//
// Views show what a Kafka consumer with Options.Isolation sees:
// ReadCommitted (the default, read_committed) hides the records of aborted
// transactions and ends at the last stable offset, the first offset of the
// earliest transaction still open; ReadUncommitted shows every data
// record. A transactional batch is aborted when its producer's next marker
// is an ABORT or a .txnindex lists it; the last stable offset comes from
// a replay of producer state from the latest producer snapshot (see
// txn.go). Both read a per-segment summary of transactional batches and
// markers, made by one scan of batch headers when first needed; the view
// indexes list the transactional batches they cover, so a segment without
// any is rendered as before. Readers (NewReader) return every data
// record.
//
// # Beside a writer
//
// A read-only log without Follow shows what the data directory held when
// it opened: each partition ends where its last segment ended then. A
// writer in another process (a mount, logfs produce) may go on appending
// to that segment and writing index entries for the batches past that
// end, or roll it: those entries are left out, not taken for corruption
// (index.Options.Growing, Seen in Check).
//
// # Following a broker
//
// With Options.Follow a read-only log follows a Kafka broker still
// writing the data directory (follow.go): inotify wakes a follower that
// publishes new whole batches, rolls, retention, cleaner swaps and
// truncations with the same atomics appends use, and the high watermark,
// which caps ReadCommitted views. Followed segments are read with pread and
// indexed in memory only, as the broker changes their files in place.
//
// # Durability
//
// Appends reach the page cache. They are fsynced by Sync, every flush.ms
// (1000 ms by default, unlike Kafka's never), after flush.messages records,
// after a roll, and on Close. Sync returns once every record appended
// before it is durable, including the folder entries of new segments. The
// recovery point (every offset below it is durable) is written to Kafka's
// recovery-point-offset-checkpoint every minute and on Close, which ends
// with .kafka_cleanshutdown; an unclean start recovers with package
// recovery. A failed or short write, anywhere in an append (the log, an
// index, a new segment), is undone before the append returns, so nothing
// half-appended is ever visible; ENOSPC, EIO and EDQUOT reach the caller
// wrapped as they came. If the undo fails too, the partition refuses
// appends with ErrFailed until it is reopened, and recovered.
//
// # Retention
//
// retention.bytes and retention.ms delete the oldest segments (a prefix
// only, never the sole active segment; an active segment that is condemned
// too is rolled first). A deleted segment leaves the partition at once,
// its files are renamed *.deleted and unlinked after file.delete.delay.ms;
// readers and views that hold it finish it. Readers of a deleted topic (or
// a closed log) finish the segment they hold from its open .log, indexed in
// memory if need be, and then get ErrClosed: nothing is opened, rebuilt or
// removed by the names of its files, which a topic created again under the
// name reuses.
//
// # Concurrency
//
// Any number of readers and views run alongside appends: they load the
// segment list and committed sizes from atomics that the appender stores
// after writing the bytes they describe, so no reader ever sees part of a
// batch. Appends to one partition are serialised. Lock order:
// Log.mu → Topic.mu → Partition.mu → Partition.flushMu → segment.idxMu →
// the index package's own locks. Partition.Changed and Wait let followers
// sleep until the next append without polling.
package storage
