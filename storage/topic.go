package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
)

// Topic is a named set of partitions sharing settings.
type Topic struct {
	log  *Log
	name string

	mu         sync.Mutex // guards partitions and overrides; taken after Log.mu
	partitions []*Partition
	overrides  Overrides
	config     atomic.Pointer[Config]
	// holes counts the bad ranges the view indexes of its segments have
	// learned: a partition's cached view sizes (sizeCache) summed before
	// the last one are not used.
	holes atomic.Uint64
}

func newTopic(l *Log, name string, o Overrides) *Topic {
	t := &Topic{log: l, name: name, overrides: o}
	t.setOverrides(o)
	return t
}

func (t *Topic) setOverrides(o Overrides) {
	c := t.log.defaults.With(o)
	t.overrides = o
	t.config.Store(&c)
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Config returns the settings in force.
func (t *Topic) Config() Config { return *t.config.Load() }

// Overrides returns the settings stored for this topic.
func (t *Topic) Overrides() Overrides {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := Overrides{}
	for k, v := range t.overrides {
		o[k] = v
	}
	return o
}

func (t *Topic) segmentConfig() *segmentConfig {
	c := t.Config()
	return &segmentConfig{indexBytes: c.SegmentIndexBytes, indexInterval: c.IndexIntervalBytes, segmentBytes: c.SegmentBytes, readOnly: t.log.opts.ReadOnly, follow: t.log.opts.Follow, gapless: t.log.gapless, holes: &t.holes}
}

// Partitions returns the topic's partitions in order. A broker's data
// directory may hold only some partitions of a topic (Kafka spreads them
// over brokers), so the numbers need not be dense.
func (t *Topic) Partitions() []*Partition {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Partition, 0, len(t.partitions))
	for _, p := range t.partitions {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Partition returns partition id.
func (t *Topic) Partition(id int) (*Partition, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id < 0 || id >= len(t.partitions) || t.partitions[id] == nil {
		return nil, fmt.Errorf("%s partition %d: %w", t.name, id, ErrNoPartition)
	}
	return t.partitions[id], nil
}

// AddPartition creates partition id, which must be the next number: Kafka
// only ever grows a topic's partitions.
func (t *Topic) AddPartition(id int) (*Partition, error) {
	l := t.log
	if l.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case l.closed:
		return nil, ErrClosed
	case l.topics[t.name] != t:
		return nil, fmt.Errorf("%q: %w", t.name, ErrNoTopic) // deleted
	}
	if err := l.forgetCheckpointsOf(recovery.TopicPartition{Topic: t.name, Partition: id}); err != nil {
		return nil, err
	}
	return t.addPartition(id)
}

// addPartition is AddPartition for a caller that holds t.log.mu and has
// made sure the checkpoints hold nothing of the partition.
func (t *Topic) addPartition(id int) (*Partition, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id != len(t.partitions) {
		return nil, fmt.Errorf("%w: topic %s has %d partitions, the next is %d, not %d", ErrInvalidPartition, t.name, len(t.partitions), len(t.partitions), id)
	}
	if id >= layout.MaxPartitions {
		return nil, fmt.Errorf("%w: topic %s has %d partitions, the most a topic has", ErrInvalidPartition, t.name, layout.MaxPartitions)
	}
	p, err := t.createPartition(id)
	if err != nil {
		return nil, err
	}
	t.partitions = append(t.partitions, p)
	return p, nil
}

// createPartition makes the folder and first segment of a new partition and
// makes them durable before the partition is used.
func (t *Topic) createPartition(id int) (*Partition, error) {
	fs := t.log.fs
	name := layout.PartitionDirName(t.name, id)
	if len(name) > layout.MaxNameLength {
		return nil, fmt.Errorf("%w: the folder of partition %d of a topic named with %d characters would pass %d bytes", ErrInvalidPartition, id, len(t.name), layout.MaxNameLength)
	}
	dir := filepath.Join(t.log.dir, name)
	if _, err := fs.Stat(dir); err == nil {
		return nil, fmt.Errorf("%w: %s exists", ErrTopicExists, dir)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := newPartition(t, id, dir)
	seg, err := createSegment(fs, dir, 0, t.segmentConfig(), t.log.logger)
	if err == nil {
		p.setSegments([]*segment{seg})
		p.lastAppend.Store(t.log.now().UnixNano())
		if err = fs.SyncDir(dir); err == nil {
			err = fs.SyncDir(t.log.dir)
		}
		if err != nil {
			seg.release()
		}
	}
	if err != nil {
		// Nothing of a partition that failed may stay: a start would take
		// the folder for a partition, and a retry for an existing one.
		if rerr := fs.RemoveAll(dir); rerr != nil {
			t.log.logger.Warn("removing a partition that could not be created", "dir", dir, "err", rerr)
		}
		return nil, err
	}
	return p, nil
}

// SetConfig stores new overrides for the topic. They apply to appends from
// now on; index sizes apply to segments created from now on. A topic that
// was deleted gets ErrNoTopic, as AddPartition: its settings file is named
// by the topic's name, which a topic created again under it now owns.
func (t *Topic) SetConfig(o Overrides) error {
	l := t.log
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case l.closed:
		return ErrClosed
	case l.topics[t.name] != t:
		return fmt.Errorf("%q: %w", t.name, ErrNoTopic) // deleted
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.writeConfig(o); err != nil {
		return err
	}
	t.setOverrides(o)
	return nil
}

func (t *Topic) writeConfig(o Overrides) error {
	return t.log.writeTopicFile(t.name, topicFile{overrides: o})
}

// close closes every partition.
func (t *Topic) close() error {
	var errs []error
	for _, p := range t.Partitions() {
		errs = append(errs, p.close())
	}
	return errors.Join(errs...)
}

// checkpoints adds the topic's recovery points and log start offsets.
func (t *Topic) checkpoints(points, start map[recovery.TopicPartition]record.Offset) {
	for _, p := range t.Partitions() {
		tp := recovery.TopicPartition{Topic: t.name, Partition: p.id}
		points[tp] = p.RecoveryPoint()
		start[tp] = p.StartOffset()
	}
}
