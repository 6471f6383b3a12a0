package fs

import (
	"context"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// Cluster is a Kafka cluster mounted in place of the data directory's own
// topics (logfs mount --bootstrap-server; package kafka implements it).
// The storage.Log given to Mount is then the local copy of what was
// fetched: record files, their sizes and reads come from the copy's
// partitions with the code that serves local data, and what the cluster
// decides comes from here: which topics and partitions exist, the log
// start and end offsets, lookups by time, and appends.
//
// Errors wrap storage's sentinels or a syscall.Errno, so that toErrno maps
// them as it maps local ones. Every method may be called concurrently.
type Cluster interface {
	// Topics returns the cluster's topic names, sorted, internal ones too.
	Topics(ctx context.Context) ([]string, error)
	// Partitions returns how many partitions topic has, or an error
	// wrapping storage.ErrNoTopic.
	Partitions(ctx context.Context, topic string) (int, error)
	// CreateTopic creates a topic with the brokers' defaults.
	CreateTopic(ctx context.Context, name string) error
	// CreatePartition adds partition id, the topic's next number.
	CreatePartition(ctx context.Context, topic string, id int) error
	// Copy returns the local copy of a partition.
	Copy(ctx context.Context, topic string, id int) (*storage.Partition, error)
	// Offsets returns the partition's log start and end offsets on the
	// cluster: the end is what a consumer of the mount's isolation level
	// reads up to.
	Offsets(ctx context.Context, p *storage.Partition) (start, end record.Offset, err error)
	// OffsetForTime returns the first offset stamped at or after ts (ms),
	// or the end offset when no record is that recent.
	OffsetForTime(ctx context.Context, p *storage.Partition, ts int64) (record.Offset, error)
	// Hold returns once the copy holds every record from `from` to the end
	// offset the cluster has now, and keeps it following the cluster until
	// release is called.
	Hold(ctx context.Context, p *storage.Partition, from record.Offset) (release func(), err error)
	// Produce appends recs in order and returns how many the cluster
	// acknowledged: all, or the first ones and no error (the rest were
	// not appended), or the first ones and an error (the rest failed but
	// may have been appended: they must not be sent again), or none and
	// an error. A record file opened after it returns shows them.
	Produce(ctx context.Context, p *storage.Partition, recs []storage.Record) (int, error)
	// RefreshLimit reads the topic's max.message.bytes on the cluster
	// again, into the copy's topic, before a line is refused as over the
	// limit the copy knows, and reports whether it changed.
	RefreshLimit(ctx context.Context, p *storage.Partition) bool
}

// The tree asks these, which go to the cluster when one is mounted and to
// the log otherwise.

func (f *logFS) topicNames(ctx context.Context) ([]string, error) {
	if f.c != nil {
		return f.c.Topics(ctx)
	}
	return f.l.Topics(), nil
}

// topicExists reports whether a topic exists (ENOENT-worthy errors are
// false).
func (f *logFS) topicExists(ctx context.Context, name string) bool {
	if f.c != nil {
		_, err := f.c.Partitions(ctx, name)
		return err == nil
	}
	_, err := f.l.Topic(name)
	return err == nil
}

func (f *logFS) createTopic(ctx context.Context, name string) error {
	if f.c != nil {
		return f.c.CreateTopic(ctx, name)
	}
	_, err := f.l.CreateTopic(name, 1, nil)
	return err
}

// partitionIDs lists a topic's partition numbers.
func (f *logFS) partitionIDs(ctx context.Context, topic string) ([]int, error) {
	if f.c != nil {
		n, err := f.c.Partitions(ctx, topic)
		if err != nil {
			return nil, err
		}
		ids := make([]int, n)
		for i := range ids {
			ids[i] = i
		}
		return ids, nil
	}
	t, err := f.l.Topic(topic)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, p := range t.Partitions() {
		ids = append(ids, p.ID())
	}
	return ids, nil
}

// storagePartition returns the partition whose files the tree serves: the
// log's own, or the copy of the cluster's.
func (f *logFS) storagePartition(ctx context.Context, topic string, id int) (*storage.Partition, error) {
	if f.c != nil {
		return f.c.Copy(ctx, topic, id)
	}
	return f.l.Partition(topic, id)
}

func (f *logFS) addPartition(ctx context.Context, topic string, id int) (*storage.Partition, error) {
	if f.c != nil {
		if err := f.c.CreatePartition(ctx, topic, id); err != nil {
			return nil, err
		}
		return f.c.Copy(ctx, topic, id)
	}
	t, err := f.l.Topic(topic)
	if err != nil {
		return nil, err
	}
	return t.AddPartition(id)
}

// offsets returns the log start and end offsets that record files resolve
// against.
func (ps *partState) offsets(ctx context.Context) (start, end record.Offset, err error) {
	if c := ps.f.c; c != nil {
		return c.Offsets(ctx, ps.p)
	}
	return ps.p.StartOffset(), ps.p.LatestOffset(), nil // the LSO under read_committed, as on a cluster
}

func (ps *partState) offsetForTime(ctx context.Context, ts int64) (record.Offset, error) {
	if c := ps.f.c; c != nil {
		return c.OffsetForTime(ctx, ps.p, ts)
	}
	return ps.p.OffsetForTime(ts)
}

// hold makes sure the partition holds the records from off on that a view
// of it must show now (always, locally), until release.
func (ps *partState) hold(ctx context.Context, off record.Offset) (release func(), err error) {
	if c := ps.f.c; c != nil {
		return c.Hold(ctx, ps.p, off)
	}
	return func() {}, nil
}

// appendRecords appends recs, the complete lines of one write, and returns
// how many it took: all of them locally (storage.Partition.Append: one
// batch unless it would not fit max.message.bytes or a segment, and
// atomic); on a cluster all of them, in as few produce batches as
// max.message.bytes allows, or the first ones when a batch failed (a
// short write).
func (ps *partState) appendRecords(ctx context.Context, recs []storage.Record) (int, error) {
	if c := ps.f.c; c != nil {
		return c.Produce(ctx, ps.p, recs)
	}
	// Locally one atomic Append: all of them or, on an error, none.
	if _, err := ps.p.Append(recs); err != nil {
		return 0, err
	}
	return len(recs), nil
}

// appendValues is appendRecords of records with these values only, the
// lines of an append file.
func (ps *partState) appendValues(ctx context.Context, values [][]byte) (int, error) {
	if c := ps.f.c; c != nil {
		recs := make([]storage.Record, len(values))
		for i, v := range values {
			recs[i].Value = v
		}
		return c.Produce(ctx, ps.p, recs)
	}
	if _, err := ps.p.AppendValues(values); err != nil {
		return 0, err
	}
	return len(values), nil
}

// syncAppends is fsync(2) of an append file: locally the partition's
// records are made durable; on a cluster every append already returned
// acknowledged by all in-sync replicas (acks=all), so there is nothing
// left to wait for.
func (ps *partState) syncAppends() error {
	if ps.f.c != nil {
		return nil
	}
	return ps.p.Sync()
}
