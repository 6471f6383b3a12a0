// Package record reads and writes Kafka's RecordBatch v2, the unit of data in
// a segment's .log file, byte for byte as Apache Kafka lays it out.
//
// # Batch layout
//
// A .log file is a sequence of batches with no file header and no padding.
// Every fixed-width integer is big-endian.
//
//	 0       8          12                    16     17      21          23
//	+--------+----------+---------------------+------+-------+-----------+
//	| base   | batch    | partition leader    |magic | crc   |attributes |
//	| offset | length   | epoch               | (2)  | (32C) |  (int16)  |
//	| int64  | int32    | int32               | int8 | uint32|           |
//	+--------+----------+---------------------+------+-------+-----------+
//	 23            27          35          43          51      53      57      61
//	+-------------+-----------+-----------+-----------+-------+-------+-------+----------
//	| last offset | base      | max       | producer  | prod. | base  |record | records…
//	| delta int32 | timestamp | timestamp | id int64  | epoch | seq   |count  | (maybe
//	|             | int64     | int64     |           | int16 | int32 |int32  | compressed)
//	+-------------+-----------+-----------+-----------+-------+-------+-------+----------
//
// batch length counts the bytes after itself, so a batch occupies
// batch length + 12 bytes. The CRC-32C covers bytes [21, end): the base
// offset and the leader epoch can be rewritten without recomputing it, which
// is how a log assigns offsets to a batch built before it knew them.
//
// Attributes (low byte): bits 0-2 compression (0 none, 1 gzip, 2 snappy in
// xerial framing, 3 lz4 frame, 4 zstd), bit 3 timestamp type (1 =
// LogAppendTime), bit 4 transactional, bit 5 control batch, bit 6 delete
// horizon present.
//
// # Record layout
//
// Records follow the header back to back, compressed together as one stream
// when the batch is compressed. Varints are zig-zag, as encoding/binary's
// Varint; a varint is at most 5 bytes and a varlong at most 10.
//
//	length varint | attributes int8 | timestamp delta varlong | offset delta varint |
//	key length varint (-1 = null) | key | value length varint (-1 = null) | value |
//	header count varint | { key length varint | key | value length varint | value }…
//
// # Reading
//
// A Scanner walks the batches of a file through io.ReaderAt and checks each
// header; Decoder.Records iterates the records of one batch, decompressing
// them into buffers the Decoder keeps between batches. Nothing in this package
// trusts a length read from disk before checking it against the bytes that
// are actually there, so a corrupt or hostile file costs an error, never a
// panic or an allocation larger than the data.
//
// # Concurrency
//
// Builder, Decoder, Scanner and RecordIter are not safe for concurrent use;
// give each goroutine its own.
package record
