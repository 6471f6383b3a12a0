// Package recovery brings a data directory to a consistent state when it is
// opened, and keeps the files that make the next open fast: Kafka's loading
// and recovery rules (LogLoader, LogSegment.recover, the checkpoint files
// and the clean-shutdown marker), with the bugs Kafka hit designed out.
// storage.Open drives it; nothing else needs to.
//
// # Durability promise
//
// A record whose append was followed by a completed Sync (or Close) is
// present after any crash, with its exact bytes. After a crash the records
// of a partition are exactly the offsets [log start, log end): what a crash
// tore is cut with what follows it. Damage to durable data loses only the
// batches it hit: the rest is kept, and in a gapless partition the lost
// offsets are a hole that reads and Check report. Offsets continue without gaps: the next append gets the log
// end offset. A crash while recovering is recovered from like any other.
//
// # Clean shutdown
//
// storage's Close flushes every partition, gives each active segment's time
// index its final entry, trims and flushes both indexes, writes
// recovery-point-offset-checkpoint and log-start-offset-checkpoint (each by
// write tmp, fsync, rename, fsync dir; WriteCheckpoint) and only then
// .kafka_cleanshutdown (WriteCleanShutdownMarker). The next open deletes
// the marker first (TakeCleanShutdownMarker: a crash while loading must not
// leave it to vouch for a half-loaded log, KAFKA-10471), trusts the
// checkpoints and maps no index: it lists each folder, walks the batch
// headers of each last segment from its last offset-index entry to find
// the log end (lastSegmentEnd, a few KiB: a damaged checkpoint must not
// decide it), and storage opens the .log files. No other log data is read.
//
// # Unclean open
//
// For every partition, on a pool of threads (LoadAll; one job per
// partition, as Kafka's num.recovery.threads.per.data.dir):
//
//  1. Leftovers are handled as Kafka does: *.deleted and *.cleaned files
//     are removed; *.swap files of a split that never finished (a *.cleaned
//     at or below them) are removed, the others complete the interrupted
//     swap (the segments they cover are removed, the suffix dropped), but
//     not a swap that cannot be the cleaner's: any in logfs's own data
//     directory (nothing compacts there), one with no valid batch, one
//     that reaches into the last segment; that one is set aside
//     (NAME.log.swap.stray) and the old segments stay; index
//     files with no .log are removed; so are the *.tmp files of an
//     interrupted index rebuild.
//  2. Every segment from the one holding the recovery point to the end is
//     scanned (RecoverSegment): each batch's size, magic, CRC-32C and
//     offsets (at or above the segment's base, above the previous batch's
//     last offset, within a relative offset of the base) are checked. The
//     scan salvages: after invalid bytes it looks for the next position
//     where a batch passes those checks and may follow the last valid one
//     (record.Resync) and goes on from there, listing each bad range
//     (SegmentResult.Bad). After a clean shutdown, a segment that starts
//     past the recorded end (a copy, a stray file) makes the load scan from
//     the segment holding that end.
//  3. The decisions, in order (LoadPartition; never a deletion of a batch
//     that passes its checks):
//     - a segment whose first intact batch contradicts its name (below the
//     name; in a gapless partition, PartitionOptions.Gapless, anything but
//     the name) or whose base is below where the segment before ends is
//     set aside: renamed NAME.log.stray, its indexes removed;
//     - a loss whose offsets reach at or above both the recovery point and
//     the log start was never durable there: a crash tore the tail. A bad
//     range whose first offset lies there: the segment is cut at it, and
//     every later segment is set aside. Missing offsets between two
//     segments any of which lies there (a crash lost the end of a segment,
//     or a whole one, and kept a later file): the later segment and every
//     one after it are set aside, and the log ends where the earlier one
//     ends;
//     - a bad range below that is damage: it is cut out and the rest kept.
//     In a gapless partition a log that ends below the recovery point (a
//     bad range took the end of the last segment, or the last .log is
//     gone, or a gap that reaches past the recovery point begins below
//     it) leaves the log end there: a new, empty segment starts at the
//     recovery point, and the lost offsets are a hole between the two
//     (they were durable and may have been read, so they are never handed
//     out again; a read-only load reports the hole);
//     A gap between segments entirely below is Kafka's compaction, or in a
//     gapless partition a hole (PartitionReport.Holes).
//     The bytes of every range cut are first copied to
//     layout.CutFileName ("NAME.log.cut-FROM-TO", or with .1, .2, … when
//     an earlier recovery kept bytes under that name; not when all zero) and
//     the folder fsynced; a range at the end is then cut off (truncate,
//     fsync), ranges inside by writing the rest to NAME.log.tmp, fsync,
//     rename, fsync dir. Both indexes are rebuilt with Kafka's rules (an
//     entry when more than index.interval.bytes lie since the last, keyed
//     by the batch's last offset at its start) and the time index ends
//     with the segment's max timestamp, unless the files there keep the
//     rule of index.Verifier against every batch and nothing was cut: then
//     they are kept as they are (a read-only load uses them). Index files
//     are written as *.tmp and renamed into place. Scans run up to four
//     segments ahead of the decisions, which are taken in order. logfs
//     never deletes a .cut-* or .stray file.
//  4. Segments below the recovery point were fsynced before the checkpoint
//     that vouches for them was written: they are not scanned. Missing
//     index files are rebuilt from the batch headers now (RebuildIndexes);
//     the others are checked when first used (storage: the index package's
//     rules for every entry, and each file's last entry against the log)
//     and rebuilt on disk then if they break a rule, or indexed in memory
//     on a read-only log.
//  5. A partition with no segment gets an empty one at its log start or
//     recovery point, whichever is higher; an empty active segment gets
//     empty indexes.
//  6. The log start is the checkpoint's, or the first segment's base if
//     higher. Retention writes the checkpoint with the new log start before
//     it renames a segment, so a crash can only bring segments back below
//     it: segments entirely below the log start are removed (Expired), and a
//     log that ends below it starts afresh there with an empty segment, as
//     Kafka does, so that no offset is handed out twice.
//
// A corrupt batch in a segment below the recovery point is not found at
// open: a read that reaches it fails with a *record.CorruptError naming the
// file, position and rule (storage's Reader and View), and an index rebuild
// that meets it logs it and lists it in the report. Loading with Force
// (storage.Options.ForceRecovery) scans every segment and cuts there.
//
// A load with ReadOnly changes nothing: leftovers stay, invalid tails are
// hidden rather than cut (Segment.Size), segments to set aside are left out,
// indexes are not rebuilt; the report says what a writable load would do.
//
// # What recovery does with damaged files
//
// Each row is a case of TestCorruption (a cleanly closed partition of four
// segments, damaged, then loaded read-only and writable) or of the crash
// loop; "unclean" means the marker is gone but the checkpoints say the
// data ended where it did, so only the last segment is scanned.
//
//	damage                                       shutdown   outcome
//	-------------------------------------------  ---------  ------------------------------------------------
//	last batch cut at any byte (torn write)      unclean    .log cut at the batch's start; the rest kept
//	one bit of size, magic, crc, attributes,     unclean    above the recovery point: .log cut at that
//	  offset delta, timestamps, producer fields,              batch's start, later segments set aside;
//	  record count or payload flipped                         below it: the batch alone cut out (hole)
//	base offset lowered, or made negative        unclean    cut at that batch (offsets must increase)
//	base offset raised                           unclean    kept at the raised offset: the CRC does not
//	                                                          cover it; a hole in a gapless partition
//	leader epoch flipped (undetectable)          unclean    kept; logfs does not use it
//	tail zeroed, file all zeros, zero padding,   unclean    cut where the zeros or garbage start
//	  garbage or a huge length appended
//	invalid batch in an older segment            no ckpt    cut there; every later segment set aside
//	                                                          (.stray): nothing was known durable
//	invalid batch below the recovery point       (un)clean  kept; reads reaching it fail with
//	                                                          *record.CorruptError (file, position, reason);
//	                                                          Check fails; Force cuts the batch out,
//	                                                          keeps it aside, keeps the rest (a hole)
//	garbage appended after a clean shutdown      clean      found by the walk to the log end: cut and
//	                                                          kept aside, as a torn tail
//	.index or .timeindex removed                 any        rebuilt at load, byte for byte
//	.index or .timeindex cut mid-entry,          any        rebuilt on first use, byte for byte (on a
//	  .timeindex zeroed                                       read-only log: indexed in memory)
//	.index or .timeindex zero-padded             any        kept: a zero tail ends the entries, as in
//	  (untrimmed), .index zeroed                              Kafka's active segment (a zeroed .index is
//	                                                          valid and empty)
//	whole entries lost from a .index's end       clean      kept: a valid, sparser index
//	whole entries lost from a .timeindex's end   clean      rebuilt on first use: a sealed segment's
//	                                                          time index ends with its max timestamp
//	last entry breaking the rule against the     any        rebuilt on first use
//	  log (e.g. a single time entry zeroed to
//	  (0, base)), an entry a lookup proves wrong
//	index files of a scanned segment             unclean    kept when they keep the rule against
//	                                                          every batch (Kafka's included), else
//	                                                          rebuilt
//	active segment's indexes garbage             any        rebuilt when it is scanned or opened for
//	                                                          writing; appends never fail on them
//	*.deleted, *.cleaned, *.tmp files            any        removed
//	*.swap (completed or interrupted swap)       any        swap completed: replaced segments removed,
//	                                                          suffix dropped, missing indexes rebuilt
//	*.swap of an unfinished split                any        removed with the *.cleaned
//	*.index.swap, *.timeindex.swap without       any        removed: nothing to derive them from
//	  their *.log.swap
//	*.swap in logfs's own data directory, or     any        set aside (*.log.swap.stray), never
//	  with no valid batch, or reaching into                   completed: the old segments stay
//	  the last segment
//	index files with no .log (orphans)           any        removed
//	active segment's .log missing, or its last   any        orphans removed; the log ends where the
//	  batches below the recovery point                        previous data does. Gapless: an empty
//	                                                          segment at the recovery point, the lost
//	                                                          offsets a hole (never handed out again);
//	                                                          Kafka's directory: appends go on there
//	every segment file missing                   unclean    an empty segment at the recovery point;
//	                                                          gapless: the offsets from the log start to
//	                                                          it reported as lost (a hole)
//	segments entirely below the log-start        any        removed: retention deleted them, and a crash
//	  checkpoint (retention's renames reverted)               brought some back (reported as expired)
//	log end below the log-start checkpoint       unclean    every segment dropped, an empty one at the log
//	  (retention's renames outlived its roll)                 start (Kafka): no offset is handed out twice
//	empty active segment with garbage indexes    any        recreated with empty indexes
//	legacy (magic 0/1) message where v2 stops    unclean    refused: ErrLegacyFormat, nothing cut
//	stray garbage .log, a segment renamed or     any (a     set aside as NAME.log.stray; the log end
//	  copied under another base offset,            copy      does not move; a renamed segment's offsets
//	  overlapping offsets                          past the   are a hole
//	                                               end)
//	emptied sealed .log in the middle            any        kept empty: a hole (reads and Check fail)
//	junk after the last batch of a sealed        forced     cut off, kept in NAME.log.cut-FROM-TO
//	  segment
//
// # Reporting, for `logfs check` and `logfs check --repair`
//
// Every load returns a Report (LoadAll; storage keeps it:
// storage.Log.RecoveryReport). It lists per partition the cuts (file,
// range, bytes cut, the rule, the file that keeps them), the segments set
// aside and why, the holes, the
// corrupt batches left in place, the leftovers removed, the swaps
// completed, the indexes rebuilt, an empty segment created, and warnings;
// WriteText prints it one line per event and a summary line ("would cut"
// on a read-only load), and Problems counts the cuts, drops and corruption
// found. `logfs check` prints, per partition, the bytes cut and the
// segments set aside that storage sums from it (storage.Partition.Recovery),
// then what storage.Log.Check finds. Every event is also
// logged with slog when it happens (Warn for cuts and drops, Error for
// corruption, Info for leftovers), and LoadAll logs "recovering logs" with
// the partitions and .log bytes to scan, the same with partitions_left and
// bytes_left every ProgressInterval (5 s), and "recovery done" with the
// bytes scanned, the duration and MB/s.
//
// The CLI's two modes map onto storage.Options:
//
//	logfs check            {ReadOnly: true}: load as a writable open would, change nothing, print
//	                       what it would do; Log.Check() then reads and verifies every byte
//	logfs check --repair   {ForceRecovery: true}: scan everything, cut out each bad range (kept
//	                       aside), set strays aside, rebuild indexes, print what was done
//
// # Concurrency
//
// LoadPartition works on one partition folder and must not run while the
// partition is open elsewhere (storage holds the data directory's lock).
// LoadAll runs partitions in parallel; within a partition, segment scans
// run ahead in parallel and every change to a file is made in order by one
// goroutine.
package recovery
