package fs

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/logfs/logfs/record"
)

// kind is what a node is; it is part of its inode number.
type kind uint8

const (
	kindTopic kind = iota + 1
	kindPartition
	kindAppend
	kindAppendJSONL
	kindOffsetDir
	kindTimeDir
	kindInfo
	kindValues // offset/N: record values
	kindJSONL  // offset/N.jsonl
	// time/T and time/T.jsonl while no record is stamped T or later (the
	// offset field is T in ms): see timefile.go.
	kindTime
	kindTimeJSONL
)

// rootIno is the root directory's inode number, as FUSE fixes it.
const rootIno = 1

// inoMask keeps inode numbers below 2^63, where go-fuse starts handing
// out its own.
const inoMask = 1<<63 - 1

// ino derives a node's inode number from what it shows: the topic, the
// partition, the kind of node and, for record files, the starting offset.
// The same file gets the same number in every mount of the same data, so
// `ls -i`, `find -inum` and tools that compare inodes (tail -F, rsync)
// behave, and concurrent lookups of one file deduplicate in go-fuse. The
// fields are hashed (FNV-1a, 63 bits): a collision between two of the few
// thousand nodes a kernel keeps at once is about as likely as a
// cosmic-ray bit flip, and lookups check for it (see lookupRecord).
func ino(topic string, partition int, k kind, off record.Offset) uint64 {
	h := fnv.New64a()
	h.Write([]byte(topic))
	var b [1 + 8 + 1 + 8]byte
	b[0] = 0 // separates the topic from the numbers
	binary.BigEndian.PutUint64(b[1:], uint64(partition))
	b[9] = byte(k)
	binary.BigEndian.PutUint64(b[10:], uint64(off))
	h.Write(b[:])
	n := h.Sum64() & inoMask
	if n <= rootIno {
		n += 2
	}
	return n
}
