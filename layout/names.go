// Package layout names the files and folders of a data directory, exactly as
// Apache Kafka names them, and holds the rules for those names. Nothing else
// in logfs formats or parses a segment file name or a partition folder.
//
//	DATA/
//	  .kafka_cleanshutdown                 present only after a clean shutdown
//	  recovery-point-offset-checkpoint     text: version, count, "topic partition offset" lines
//	  log-start-offset-checkpoint
//	  <topic>.props                        logfs: the topic's settings (Kafka property names)
//	  <topic>-<partition>/
//	    00000000000000000000.log           RecordBatch v2, named by base offset, 20 digits
//	    00000000000000000000.index         offset index
//	    00000000000000000000.timeindex     time index
//	    00000000000000000000.viewindex     logfs: rendered positions of the values view
//	    00000000000000000000.txnindex      Kafka: aborted transactions (read, see package txn)
//	    00000000000000000042.snapshot      Kafka: producer state at offset 42 (read)
package layout

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/logfs/logfs/record"
)

// File name suffixes, as Kafka names them (LogFileUtils). These are part of
// the on-disk format; do not change.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	// ViewIndexSuffix names logfs's own sidecar of rendered positions (see
	// package storage). Kafka ignores files it does not know in a partition
	// folder.
	ViewIndexSuffix = ".viewindex"
	// TxnIndexSuffix names Kafka's index of aborted transactions, and
	// SnapshotSuffix its producer-state snapshots, which are named by the
	// offset they were taken at rather than by a segment (package txn).
	TxnIndexSuffix = ".txnindex"
	SnapshotSuffix = ".snapshot"
	DeletedSuffix  = ".deleted"
	CleanedSuffix  = ".cleaned"
	SwapSuffix     = ".swap"
	// StraySuffix is added to a .log that recovery set aside whole: a
	// stray or misnamed file, or a segment that cannot follow the log
	// (see package recovery). logfs never deletes one.
	StraySuffix = ".stray"
	// CutInfix names the file beside a segment that keeps the bytes
	// recovery cut out of it: "<base>.log.cut-FROM-TO", FROM and TO the
	// byte positions in the .log as it was (see CutFileName). logfs never
	// deletes one.
	CutInfix = ".cut-"
	// TopicConfigSuffix names a topic's settings file at the top of the
	// data directory: DATA/<topic>.props. Kafka keeps topic settings
	// elsewhere (ZooKeeper or KRaft) and ignores plain files there. It is
	// short so that the name of a topic of 249 characters, Kafka's limit,
	// still fits in 255 bytes with it.
	TopicConfigSuffix = ".props"
	// LegacyTopicConfigSuffix named the settings file before: read, and
	// renamed to TopicConfigSuffix at the next writable open. With it a
	// name over 238 characters did not fit.
	LegacyTopicConfigSuffix = ".topic.properties"
	// TopicConfigTmp is the one temporary file settings files are written
	// through (one at a time), named apart from every topic's.
	TopicConfigTmp = "logfs-settings.tmp"
	// LockFile is held (flock) by the process that has the log open for
	// writing.
	LockFile = ".lock"
)

// Checkpoint and marker files at the top of a data directory.
const (
	RecoveryPointFile = "recovery-point-offset-checkpoint"
	LogStartFile      = "log-start-offset-checkpoint"
	CleanShutdownFile = ".kafka_cleanshutdown"
	// ReplicationOffsetFile holds a broker's high watermarks, in the same
	// format; logfs only reads it (a followed broker directory).
	ReplicationOffsetFile = "replication-offset-checkpoint"
)

// maxTopicLength is Kafka's limit, 249 characters, which leaves room in a
// 255-byte file name for "-<partition>" up to partition 99999. The name of
// a deleted partition's folder cuts the topic short to fit, as Kafka does.
const maxTopicLength = 249

// MaxNameLength is the longest file name the data directory's file
// systems take.
const MaxNameLength = 255

// SegmentFileName returns the name of a segment's file: the base offset
// zero-padded to 20 digits, then suffix. ParseSegmentFileName reverses it;
// nothing else in logfs formats or parses these names.
func SegmentFileName(base record.Offset, suffix string) string {
	return fmt.Sprintf("%020d%s", int64(base), suffix)
}

// CutFileName names the file that keeps bytes [from, to) cut out of the
// .log of the segment at base: "00000000000000000500.log.cut-4096-8192".
func CutFileName(base record.Offset, from, to record.Position) string {
	return fmt.Sprintf("%s%s%d-%d", SegmentFileName(base, LogSuffix), CutInfix, int64(from), int64(to))
}

// ParseSegmentFileName splits a segment file name into its base offset and
// everything after the first dot (".log", ".index.deleted", …). The base is
// twenty decimal digits, as SegmentFileName writes it: "+0000000000000009999"
// is not a segment's name (strconv would read it as 9999, and a file of
// that name would stand in for 00000000000000009999.log).
func ParseSegmentFileName(name string) (record.Offset, string, bool) {
	dot := strings.IndexByte(name, '.')
	if dot != 20 {
		return 0, "", false
	}
	for i := 0; i < dot; i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, "", false
		}
	}
	n, err := strconv.ParseInt(name[:dot], 10, 64)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return record.Offset(n), name[dot:], true
}

// PartitionDirName is "<topic>-<partition>", as Kafka names it.
func PartitionDirName(topic string, partition int) string {
	return topic + "-" + strconv.Itoa(partition)
}

// DeletedPartitionDirName is the name a partition folder is renamed to
// before it is removed, as Kafka names it ("<topic>-<partition>.<uuid>-delete"):
// a crash halfway through leaves a folder that no load takes for a
// partition. unique makes the name unique (Kafka uses a UUID).
//
// As in Kafka, the topic is cut short where the whole name would pass
// MaxNameLength: the folder is only ever removed, and IsDeletedPartitionDir
// recognises it by its suffix.
func DeletedPartitionDirName(topic string, partition int, unique uint64) string {
	suffix := fmt.Sprintf("-%d.%032x%s", partition, unique, deleteDirSuffix)
	return topic[:min(len(topic), MaxNameLength-len(suffix))] + suffix
}

const deleteDirSuffix = "-delete"

// IsDeletedPartitionDir reports whether name is a partition folder renamed
// for deletion, by logfs or by Kafka: "<topic>-<partition>.<32 hex>-delete".
func IsDeletedPartitionDir(name string) bool {
	rest, ok := strings.CutSuffix(name, deleteDirSuffix)
	if !ok {
		return false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 || len(rest)-dot-1 != 32 {
		return false
	}
	for _, c := range rest[dot+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return strings.LastIndexByte(rest[:dot], '-') > 0
}

// TopicsCollide reports whether two different topic names are the same
// once '.' and '_' are taken alike, as Kafka's metric names take them:
// Kafka refuses to create a topic that collides with an existing one.
func TopicsCollide(a, b string) bool {
	return a != b && strings.ReplaceAll(a, ".", "_") == strings.ReplaceAll(b, ".", "_")
}

// ParsePartitionDirName splits on the last '-', as Kafka does. Folders Kafka
// marks for deletion, future replicas or strays ("…-delete", "…-future",
// "…-stray") and anything else that does not parse are not partitions.
func ParsePartitionDirName(name string) (string, int, bool) {
	dash := strings.LastIndexByte(name, '-')
	if dash <= 0 {
		return "", 0, false
	}
	topic := name[:dash]
	if ValidateTopic(topic) != nil {
		return "", 0, false
	}
	p, err := ParsePartition(name[dash+1:])
	if err != nil {
		return "", 0, false
	}
	return topic, p, true
}

// ValidateTopic applies Kafka's rules for topic names.
func ValidateTopic(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	case len(name) > maxTopicLength:
		return fmt.Errorf("%w: longer than %d characters", ErrInvalidTopic, maxTopicLength)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q has %q; use letters, digits, '.', '_' and '-'", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// MaxPartitions bounds a topic's partitions: they are numbered from 0 to
// MaxPartitions-1. A topic's partitions are kept in a list by number, and a
// folder named "orders-2000000000" would otherwise make every open of the
// data directory allocate two billion entries.
const MaxPartitions = 1_000_000

// ParsePartition parses a partition number as it appears in a path.
func ParsePartition(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || strconv.Itoa(p) != s {
		return 0, fmt.Errorf("%w: %q", ErrInvalidPartition, s)
	}
	if p >= MaxPartitions {
		return 0, fmt.Errorf("%w: %d, partitions are numbered below %d", ErrInvalidPartition, p, MaxPartitions)
	}
	return p, nil
}

// SegmentPath joins a partition folder and a segment file name.
func SegmentPath(dir string, base record.Offset, suffix string) string {
	return filepath.Join(dir, SegmentFileName(base, suffix))
}
