// Package recovery brings a data directory to a consistent state when it is
// opened, and keeps the files that make the next open fast: Kafka's loading
// and recovery rules (LogLoader, LogSegment.recover, the checkpoint files
// and the clean-shutdown marker), with the bugs Kafka hit designed out.
//
// # Clean shutdown
//
// Closing a log flushes every partition, trims the active indexes, writes
// recovery-point-offset-checkpoint and log-start-offset-checkpoint (each by
// write tmp, fsync, rename, fsync dir) and only then .kafka_cleanshutdown.
// The next open deletes the marker first (KAFKA-10471), trusts the
// checkpoints and reads no log data.
//
// # Unclean open
//
// For every partition, every segment from the one holding the recovery point
// to the end is recovered: its batches are walked checking size, magic,
// CRC-32C and offsets; the .log is cut at the first invalid byte; every
// later segment is dropped; both indexes are rebuilt and end with the
// segment's max timestamp. Segments below the recovery point were fsynced
// before the checkpoint that vouches for them was written; they are not
// scanned, but their indexes are checked when first used (package index)
// and replaced when they break a rule.
//
// # Durability promise
//
// A record whose append was followed by a completed Sync is present after
// any crash; nothing after a hole is visible; offsets continue without gaps.
//
// # Concurrency
//
// LoadPartition works on one partition folder and must not run while the
// partition is open elsewhere. LoadAll runs partitions in parallel.
package recovery
