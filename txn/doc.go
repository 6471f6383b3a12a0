// Package txn reads and writes the two files Apache Kafka keeps about
// transactions beside a partition's segments, byte for byte as Kafka lays
// them out (Kafka 3.7: TransactionIndex.java, AbortedTxn.java,
// ProducerStateManager.java). Every integer is big-endian.
//
// # The transaction index, <base>.txnindex
//
// One 34-byte entry per aborted transaction whose ABORT marker lies in the
// segment, in the order the markers were written (strictly increasing last
// offset). Kafka creates the file with its first entry, so most segments
// have none. Entries are read while 34 bytes remain; a shorter tail is
// ignored, as Kafka ignores it.
//
//	 0         2              10             18            26                 34
//	+---------+--------------+--------------+-------------+------------------+
//	| version | producer id  | first offset | last offset | last stable      |
//	| int16=0 | int64        | int64        | int64       | offset int64     |
//	+---------+--------------+--------------+-------------+------------------+
//
// first offset is the transaction's first offset, last offset that of its
// ABORT marker, and last stable offset the partition's LSO when the marker
// was written. A read_committed consumer skips the producer's
// transactional batches between the two offsets.
//
// # The producer snapshot, <offset>.snapshot
//
// Kafka's producer state as of offset (exclusive), written at each segment
// roll and at shutdown, so that a broker rebuilds its producer state by
// reading the latest snapshot and the log after it rather than the whole
// log.
//
//	 0         2       6        10
//	+---------+-------+--------+----------------------------------+
//	| version | crc   | count  | count × 46-byte entries          |
//	| int16=1 | u32   | int32  |                                  |
//	+---------+-------+--------+----------------------------------+
//
//	entry: producer id int64 | epoch int16 | last sequence int32 |
//	       last offset int64 | offset delta int32 | timestamp int64 |
//	       coordinator epoch int32 | current txn first offset int64 (-1: none)
//
// crc is CRC-32C of everything from byte 6 to the end.
//
// # Concurrency
//
// The functions here are pure: they read and build byte slices.
package txn
