package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/recovery"
	"github.com/logfs/logfs/vfs"
)

// Options configure a Log. The zero value opens a writable log on the
// operating system's file system with Kafka's defaults.
type Options struct {
	// FS is the file system for log and checkpoint files; nil means the
	// operating system's, confined to the data directory (vfs.Confined): a
	// link, FIFO or device planted in it is never followed or opened, and
	// is reported once to Logger (see plantedReporter).
	FS vfs.FS
	// ReadOnly opens without changing a byte: no recovery writes, no lock
	// file, no appends. Use it to look inside a Kafka broker's data.
	ReadOnly bool
	// Defaults are the settings of topics that do not set their own, over
	// Kafka's defaults (see DefaultConfig).
	Defaults Overrides
	// Logger receives recovery progress and problems; nil means slog.Default().
	Logger *slog.Logger
	// RecoveryThreads bounds how many partitions load in parallel; 0 means
	// the number of CPUs.
	RecoveryThreads int
	// CheckpointInterval is how often the recovery-point checkpoint is
	// rewritten (Kafka's log.flush.offset.checkpoint.interval.ms); 0 means
	// 60 s.
	CheckpointInterval time.Duration
	// RetentionCheckInterval is how often retention runs (Kafka's
	// log.retention.check.interval.ms); 0 means 5 minutes, <0 never. The
	// first run comes after the interval or 30 s, whichever is shorter
	// (Kafka's log.initial.task.delay.ms), so that a log reopened often
	// still gets its retention.
	RetentionCheckInterval time.Duration
	// Now is the clock; nil means time.Now. Tests move it.
	Now func() time.Time
	// ForceRecovery scans every segment of every partition as after a
	// crash, cutting each log at its first invalid batch (logfs check
	// --repair). With ReadOnly it scans and reports without cutting.
	ForceRecovery bool
	// RecoveryProgress, if not nil, is told how far loading the partitions
	// has got (see recovery.LoadOptions.OnProgress); logfs draws a
	// progress bar with it. It is called concurrently and must be quick.
	RecoveryProgress func(recovery.Progress)
	// Follow, with ReadOnly, follows a Kafka broker still writing the data
	// directory: new batches, rolls, retention, the cleaner's
	// replacements, truncations and the high watermark (see follow.go).
	// Partitions created after Open are not followed.
	Follow bool
	// Gaps says the partitions may have offset gaps, as a compacted Kafka
	// topic has, even though the data directory has no meta.properties (a
	// follower copy, package kafka). Without it a directory with no
	// meta.properties is logfs's own, which never compacts: a missing
	// offset there is a hole (ErrHole), an error for Check and for the
	// read that reaches it, not a gap to skip.
	Gaps bool
	// Isolation is what Views show (record files, consume): ReadCommitted,
	// the zero value, as a read_committed Kafka consumer; or
	// ReadUncommitted (see txn.go).
	Isolation Isolation
}

// Log is a data directory: topics made of partitions made of segments, laid
// out as Kafka lays them out.
//
// Lock order: Log.mu, then Topic.mu, then Partition.mu (see Partition).
type Log struct {
	dir      string
	opts     Options
	fs       vfs.FS // modesFS over baseFS
	baseFS   vfs.FS // Options.FS
	logger   *slog.Logger
	defaults Config
	lock     io.Closer
	// gapless says no partition may have an offset gap (see Options.Gaps).
	gapless bool

	mu     sync.RWMutex
	topics map[string]*Topic // GUARDED_BY(mu)
	// undeleted holds why the delete of a topic failed half way: its
	// settings file says "deleting" and some of its folders are left,
	// which the next writable Open removes. Until then the name cannot be
	// created again. GUARDED_BY(mu)
	undeleted map[string]error
	closed    bool // GUARDED_BY(mu)
	// ckptDone says Close wrote its last checkpoints: the directory is
	// about to be, or is, another process's, and nothing is written into
	// it any more. GUARDED_BY(mu)
	ckptDone bool

	stop chan struct{}
	bg   sync.WaitGroup
	kick chan *Partition

	report *recovery.Report // what Open's recovery found and did; set once
	// cleanOpen says the data directory had a clean shutdown marker when
	// opened: with no producer snapshot, Kafka then takes producer state
	// as empty at the log end (see txnState.load).
	cleanOpen bool
	// shutDownCleanly says .kafka_cleanshutdown was there when the
	// directory was opened (whatever the checkpoints): every log was
	// closed, so each last segment's time index has its final entry
	// (index.Sealed).
	shutDownCleanly bool

	// settingsMu serialises writes of topic settings files: they share
	// one temporary file (see writeTopicFile).
	settingsMu sync.Mutex

	// ckptMu serialises checkpoint writes: they share the files' .tmp
	// names, and two at once could interleave into a corrupt file. It is
	// taken after mu, never before.
	ckptMu sync.Mutex
	// ckptParts are the partitions with entries in the checkpoint files on
	// disk, as last read or written: a deleted topic's stay there until
	// the next write (see forgetCheckpointsOf).
	ckptParts map[recovery.TopicPartition]bool // GUARDED_BY(ckptMu)

	delMu   sync.Mutex
	pending map[*delayedJob]struct{} // GUARDED_BY(delMu)
	running sync.WaitGroup           // delayed jobs being run

	// retentionHook, when tests set it (before retention runs), is called
	// by EnforceRetention with "listed" once it has the topics and with
	// "detached" once it has taken the condemned segments out, before the
	// checkpoint write: points where it holds no lock, which no file
	// operation marks.
	retentionHook func(stage string)
}

// Open opens or creates the data directory dir. After an unclean shutdown it
// recovers every partition first (see package recovery); after a clean one
// it maps no index and reads no log data but the headers that end each
// partition's last segment, from its last offset-index entry.
//
// A writable Open takes the directory for this process (another gets an
// error wrapping vfs.ErrLocked), creates it owner-only if it is missing
// (see modes.go), and refuses, with ErrNotDataDir, a directory that holds
// files but no sign of being a data directory.
func Open(dir string, o Options) (*Log, error) {
	if o.Follow && !o.ReadOnly {
		return nil, fmt.Errorf("%w: following a broker's data directory needs a read-only log", ErrInvalidConfig)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Confined(dir, plantedReporter(o.Logger))
	}
	base := o.FS
	o.FS = modesFS{o.FS} // see modes.go
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RecoveryThreads <= 0 {
		o.RecoveryThreads = runtime.NumCPU()
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = time.Minute
	}
	if o.RetentionCheckInterval == 0 {
		o.RetentionCheckInterval = 5 * time.Minute
	}
	l := &Log{dir: dir, opts: o, fs: o.FS, baseFS: base, logger: o.Logger, defaults: DefaultConfig().With(o.Defaults),
		topics: map[string]*Topic{}, stop: make(chan struct{}), kick: make(chan *Partition, 64),
		pending: map[*delayedJob]struct{}{}}
	if err := l.open(); err != nil {
		if l.lock != nil {
			l.lock.Close()
		}
		return nil, err
	}
	if !o.ReadOnly {
		l.bg.Add(1)
		go l.background()
	}
	if o.Follow {
		if err := l.startFollow(); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *Log) open() error {
	fs := l.fs
	if l.opts.ReadOnly {
		if st, err := fs.Stat(l.dir); err != nil {
			return err
		} else if !st.IsDir() {
			return fmt.Errorf("%s: not a directory", l.dir)
		}
	} else {
		if err := mkdirDurable(l.baseFS, l.dir); err != nil {
			return err
		}
		if err := checkDataDir(fs, l.dir); err != nil {
			return err
		}
		lock, err := l.lockDir()
		if err != nil {
			return err
		}
		l.lock = lock
	}
	var clean bool
	if l.opts.ReadOnly {
		clean = recovery.HasCleanShutdownMarker(fs, l.dir)
	} else {
		var err error
		if clean, err = recovery.TakeCleanShutdownMarker(fs, l.dir); err != nil {
			return err
		}
	}
	l.shutDownCleanly = clean
	recoveryPoints := l.readCheckpoint(layout.RecoveryPointFile)
	logStarts := l.readCheckpoint(layout.LogStartFile)
	l.ckptParts = checkpointParts(recoveryPoints, logStarts)
	if recoveryPoints == nil {
		clean = false // Kafka: an unreadable recovery point means recovering everything
		recoveryPoints = map[recovery.TopicPartition]record.Offset{}
	}
	l.cleanOpen = clean
	if _, err := fs.Stat(filepath.Join(l.dir, "meta.properties")); errors.Is(err, os.ErrNotExist) {
		l.gapless = !l.opts.Gaps && !l.opts.Follow // a followed broker may compact
	} else if err != nil {
		return err
	}
	entries, err := fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	type part struct {
		topic string
		id    int
		dir   string
	}
	files, legacy, err := l.topicFiles(entries)
	if err != nil {
		return err
	}
	if !l.opts.ReadOnly {
		if err := l.finishTopics(entries, files, legacy); err != nil {
			return fmt.Errorf("finish the topic creates and deletes a crash interrupted: %w", err)
		}
		if entries, err = fs.ReadDir(l.dir); err != nil {
			return err
		}
	}
	overrides := map[string]Overrides{}
	for topic, tf := range files {
		overrides[topic] = tf.overrides
	}
	var parts []part
	for _, e := range entries {
		topic, id, ok := layout.ParsePartitionDirName(e.Name())
		if !e.IsDir() {
			if ok && files[topic].state == topicLive {
				// A file where a partition's folder belongs: the
				// partition is missing, as for Kafka, but named, as a
				// link or FIFO there is (ReadDir leaves those out).
				l.logger.Warn("left alone in the data directory: a file stands where logfs keeps a partition's folder; logfs takes the partition for missing",
					"path", filepath.Join(l.dir, e.Name()))
			}
			continue
		}
		if !ok || files[topic].state != topicLive {
			// "-delete", "-future" and "-stray" folders, anything else, and
			// (read-only) a topic a crash left half created or deleted.
			continue
		}
		parts = append(parts, part{topic, id, filepath.Join(l.dir, e.Name())})
	}
	opts := make([]recovery.PartitionOptions, len(parts))
	for i, p := range parts {
		tp := recovery.TopicPartition{Topic: p.topic, Partition: p.id}
		cfg := l.defaults.With(overrides[p.topic])
		opts[i] = recovery.PartitionOptions{
			FS: fs, Dir: p.dir, Clean: clean, Force: l.opts.ForceRecovery, ReadOnly: l.opts.ReadOnly, Logger: l.logger,
			IndexConfig:   recovery.IndexConfig{IndexBytes: cfg.SegmentIndexBytes, IndexInterval: cfg.IndexIntervalBytes},
			RecoveryPoint: offsetOr(recoveryPoints, tp, -1),
			LogStart:      offsetOr(logStarts, tp, -1),
			Gapless:       l.gapless,
		}
	}
	switch {
	case len(parts) == 0:
	case l.opts.ForceRecovery:
		l.logger.Info("recovering every segment, as asked", "dir", l.dir, "partitions", len(parts),
			"read_only", l.opts.ReadOnly)
	case !clean && l.opts.ReadOnly:
		// A read-only open beside a running writer (README: consume,
		// check and mount --read-only work beside a mount) finds no
		// marker either: nothing need be wrong, and nothing is changed.
		l.logger.Info("data directory has no clean-shutdown marker (a writer has it open, or it was not shut down cleanly); reading the log since the last checkpoint, changing nothing",
			"dir", l.dir, "partitions", len(parts), "read_only", true)
	case !clean:
		l.logger.Info("data directory was not shut down cleanly; recovering", "dir", l.dir, "partitions", len(parts),
			"forced", false, "read_only", false)
	}
	states, errs, report := recovery.LoadAll(opts, recovery.LoadOptions{Threads: l.opts.RecoveryThreads, Logger: l.logger,
		OnProgress: l.opts.RecoveryProgress})
	l.report = report
	topics := make([]*Topic, len(parts))
	for i, p := range parts {
		if errs[i] != nil {
			return fmt.Errorf("load %s: %w", p.dir, errs[i])
		}
		t := l.topics[p.topic]
		if t == nil {
			t = newTopic(l, p.topic, overrides[p.topic])
			l.topics[p.topic] = t
		}
		topics[i] = t
	}
	dirs := make([]string, len(parts))
	for i, p := range parts {
		dirs[i] = p.dir
	}
	segs, err := l.openSegments(topics, dirs, states)
	if err != nil {
		return err
	}
	for i, p := range parts {
		t := topics[i]
		for len(t.partitions) <= p.id {
			t.partitions = append(t.partitions, nil)
		}
		t.partitions[p.id] = l.openPartition(t, p.id, p.dir, states[i], segs[i])
	}
	if (!clean || l.opts.ForceRecovery) && !l.opts.ReadOnly && len(parts) > 0 {
		// Make what recovery cut and rebuilt durable, then record it.
		return l.Sync()
	}
	return nil
}

// plantedReporter reports, once each, the links, FIFOs, sockets, devices,
// hard-linked files and folders where a file belongs that vfs.Confined met in the data directory and
// left alone. What logfs does about each:
//
//   - One it only reads (a segment's .log, a checkpoint, a topic's
//     settings, meta.properties, a partition folder) is treated as absent:
//     not served, not followed, not removed.
//   - One where logfs writes a file from scratch (an index it rebuilds, a
//     new segment, a checkpoint or settings file it replaces) is replaced
//     by the new file: the entry itself is unlinked first or renamed over,
//     its target is never opened. A folder there is renamed aside (to
//     NAME.planted), never removed.
//   - One logfs must write in place (the .lock file, a segment being
//     appended to that was swapped for a link) makes that write fail with
//     an error naming it.
func plantedReporter(logger *slog.Logger) func(path string, err error) {
	return func(path string, err error) { reportPlanted(logger, path, err) }
}

// reportPlanted warns of the entry planted at path, which err describes
// (see plantedReporter).
func reportPlanted(logger *slog.Logger, path string, err error) {
	if aside := (*vfs.MovedAsideError)(nil); errors.As(err, &aside) {
		logger.Warn("moved aside in the data directory: a folder stood where logfs keeps a file; logfs never removes one, look at what it holds",
			"path", path, "to", aside.To)
		return
	}
	if errors.Is(err, vfs.ErrFolder) {
		logger.Warn("left alone in the data directory: a folder stands where logfs keeps a file; logfs takes the file for missing, and moves the folder aside (to NAME"+vfs.PlantedSuffix+") when it writes the file",
			"path", path)
		return
	}
	logger.Warn("left alone in the data directory: logfs never follows a link nor opens a FIFO, socket or device there, and never writes a file with other hard links; remove it if it is not yours",
		"path", path, "err", err)
}

// mkdirDurable creates dir and its missing parents, owner-only (see
// modes.go), and syncs the parent of each folder it creates: a new
// directory is durable only once the entry in its parent is, or a crash
// loses the data directory with everything synced inside it.
func mkdirDurable(fs vfs.FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, newDataDirPerm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fs.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func offsetOr(m map[recovery.TopicPartition]record.Offset, tp recovery.TopicPartition, def record.Offset) record.Offset {
	if v, ok := m[tp]; ok {
		return v
	}
	return def
}

func (l *Log) readCheckpoint(name string) map[recovery.TopicPartition]record.Offset {
	m, err := recovery.ReadCheckpoint(l.fs, filepath.Join(l.dir, name))
	if err != nil {
		l.logger.Warn("ignoring unreadable checkpoint", "file", name, "err", err)
		return nil
	}
	return m
}

// openSegments opens the segments of every loaded partition, on a pool of
// RecoveryThreads workers: after a clean shutdown, opening a large data
// directory is mostly these opens and stats (no index is mapped, and
// recovery read only the headers that end each partition), tens of
// thousands of them.
func (l *Log) openSegments(topics []*Topic, dirs []string, states []*recovery.PartitionState) ([][]*segment, error) {
	out := make([][]*segment, len(states))
	cfgs := make([]*segmentConfig, len(states))
	for i, st := range states {
		out[i] = make([]*segment, len(st.Segments))
		cfgs[i] = topics[i].segmentConfig()
	}
	type job struct{ p, s int }
	jobs := make(chan job, 1024)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for w := 0; w < max(l.opts.RecoveryThreads, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				s := states[j.p].Segments[j.s]
				seenEnd := record.Offset(-1)
				if l.opts.ReadOnly && j.s == len(states[j.p].Segments)-1 {
					seenEnd = states[j.p].NextOffset // a writer beside this log may append after it
				}
				seg, err := openSegment(l.fs, dirs[j.p], s.Base, s.Size, seenEnd, cfgs[j.p], s.IndexMissing, l.logger)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("open segment %d of %s: %w", s.Base, dirs[j.p], err))
					mu.Unlock()
					continue
				}
				seg.seq = uint64(j.s) // the recovered segments are in base order
				out[j.p][j.s] = seg
			}
		}()
	}
	for i, st := range states {
		for k := range st.Segments {
			jobs <- job{i, k}
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		for _, segs := range out {
			for _, s := range segs {
				if s != nil {
					s.release()
				}
			}
		}
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// openPartition makes a partition of a loaded partition's opened segments.
func (l *Log) openPartition(t *Topic, id int, dir string, st *recovery.PartitionState, segs []*segment) *Partition {
	p := newPartition(t, id, dir)
	for i, s := range segs[:len(segs)-1] {
		s.frozen.Store(true)
		// Entirely below the recovery point: fsynced before the checkpoint
		// vouched for it, so no flush needs to touch it again.
		s.durable.Store(segs[i+1].base <= st.RecoveryPoint)
	}
	p.setSegments(segs)
	p.lastAppend.Store(segs[len(segs)-1].created.UnixNano())
	p.start.Store(int64(st.LogStart))
	p.end.Store(int64(st.NextOffset))
	p.flushedTo.Store(int64(st.RecoveryPoint))
	p.recovered = newRecoveryReport(&st.Report, l.opts.ReadOnly)
	return p
}

// RecoveryReport returns what Open found and did: the segments it scanned,
// cut and dropped, the leftovers it removed, the indexes it rebuilt. With
// ForceRecovery it is what `logfs check --repair` did (the command prints
// each partition's totals, Partition.Recovery); with ReadOnly too, what it
// would do. See package recovery.
func (l *Log) RecoveryReport() *recovery.Report { return l.report }

// Dir returns the data directory.
func (l *Log) Dir() string { return l.dir }

// ReadOnly reports whether the log was opened read-only.
func (l *Log) ReadOnly() bool { return l.opts.ReadOnly }

// Isolation returns what the log's Views show (Options.Isolation).
func (l *Log) Isolation() Isolation { return l.opts.Isolation }

func (l *Log) now() time.Time { return l.opts.Now() }

// Topics returns the topic names, sorted.
func (l *Log) Topics() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	names := make([]string, 0, len(l.topics))
	for n := range l.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Topic returns a topic by name.
func (l *Log) Topic(name string) (*Topic, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	t := l.topics[name]
	if t == nil {
		return nil, fmt.Errorf("%q: %w", name, ErrNoTopic)
	}
	return t, nil
}

// Partition returns one partition of a topic.
func (l *Log) Partition(topic string, id int) (*Partition, error) {
	t, err := l.Topic(topic)
	if err != nil {
		return nil, err
	}
	return t.Partition(id)
}

// CreateTopic creates a topic with the given number of partitions and
// settings, durably.
func (l *Log) CreateTopic(name string, partitions int, o Overrides) (*Topic, error) {
	if err := layout.ValidateTopic(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > layout.MaxPartitions {
		return nil, fmt.Errorf("%w: a topic has from 1 to %d partitions, not %d", ErrInvalidPartition, layout.MaxPartitions, partitions)
	}
	if l.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.topics[name] != nil {
		return nil, fmt.Errorf("%q: %w", name, ErrTopicExists)
	}
	if err := l.undeleted[name]; err != nil {
		return nil, fmt.Errorf("%q: %w: its delete failed half way (%v); reopen the data directory to finish it", name, ErrTopicExists, err)
	}
	for other := range l.topics {
		if layout.TopicsCollide(name, other) {
			return nil, fmt.Errorf("%w: %q collides with the existing topic %q: Kafka takes '.' and '_' alike in topic names", ErrTopicCollides, name, other)
		}
	}
	tps := make([]recovery.TopicPartition, partitions)
	for i := range tps {
		tps[i] = recovery.TopicPartition{Topic: name, Partition: i}
	}
	if err := l.forgetCheckpointsOf(tps...); err != nil {
		return nil, err
	}
	// Whole or not at all (see topicfile.go): marked as being created
	// until its last partition is durable.
	if err := l.writeTopicFile(name, topicFile{overrides: o, state: topicCreating}); err != nil {
		return nil, err
	}
	t := newTopic(l, name, o)
	for i := 0; i < partitions; i++ {
		if _, err := t.addPartition(i); err != nil {
			return nil, errors.Join(err, l.removeTopic(t))
		}
	}
	if err := l.writeTopicFile(name, topicFile{overrides: o}); err != nil {
		return nil, errors.Join(err, l.removeTopic(t))
	}
	l.topics[name] = t
	return t, nil
}

// DeleteTopic closes a topic and removes its partitions and settings, all
// of them or, after a crash, none: the topic's settings file first says it
// is being deleted, durably, and an Open that finds it so finishes the
// delete (see topicfile.go). Each partition folder is renamed aside before
// it is removed, as Kafka does.
func (l *Log) DeleteTopic(name string) error {
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	t := l.topics[name]
	if t == nil {
		return fmt.Errorf("%q: %w", name, ErrNoTopic)
	}
	if err := l.writeTopicFile(name, topicFile{overrides: t.Overrides(), state: topicDeleting}); err != nil {
		return err // the topic stays, whole
	}
	delete(l.topics, name)
	if err := l.removeTopic(t); err != nil {
		if l.undeleted == nil {
			l.undeleted = map[string]error{}
		}
		l.undeleted[name] = err
		return err
	}
	return nil
}

// removeTopic closes t and removes its partition folders, then its
// settings file, each step durable before the next. An error leaves the
// rest for the next writable Open, which the settings file tells.
func (l *Log) removeTopic(t *Topic) error {
	for _, p := range t.Partitions() {
		p.drop() // its delayed unlinks would name the next topic's files
	}
	errs := []error{t.close()}
	var doomed []string
	for _, p := range t.Partitions() {
		to := filepath.Join(l.dir, layout.DeletedPartitionDirName(t.name, p.id, uint64(l.now().UnixNano())))
		if err := l.fs.Rename(p.dir, to); err != nil {
			return errors.Join(append(errs, err)...)
		}
		doomed = append(doomed, to)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, d := range doomed {
		if err := l.fs.RemoveAll(d); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	errs = append(errs, l.writeTopicFile(t.name, topicFile{}))
	return errors.Join(errs...)
}

// Sync flushes every partition and rewrites the checkpoints.
func (l *Log) Sync() error {
	var errs []error
	for _, t := range l.allTopics() {
		for _, p := range t.Partitions() {
			if err := p.Sync(); !errors.Is(err, ErrClosed) { // a topic deleted meanwhile has nothing to flush
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, l.writeCheckpoints())
	return errors.Join(errs...)
}

func (l *Log) allTopics() []*Topic {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.topicsLocked()
}

func (l *Log) writeCheckpoints() error {
	if l.opts.ReadOnly {
		return nil
	}
	// The topics are taken under mu and the files written under ckptMu,
	// taken before mu is let go: a topic deleted and created again after
	// this list was taken writes its checkpoints after these.
	l.mu.RLock()
	if l.ckptDone {
		l.mu.RUnlock()
		return ErrClosed
	}
	topics := l.topicsLocked()
	l.ckptMu.Lock()
	l.mu.RUnlock()
	defer l.ckptMu.Unlock()
	return l.writeCheckpointsOf(topics)
}

// forgetCheckpointsOf rewrites the checkpoint files without the entries of
// partitions about to be created, which a deleted topic of the same name
// left there (or a planted file holds): otherwise a crash before the next
// checkpoint write would hand the new partitions the old ones' log start
// offsets and recovery points, and recovery would remove the new records
// as deleted by retention. The caller holds mu (a read lock is enough).
func (l *Log) forgetCheckpointsOf(tps ...recovery.TopicPartition) error {
	l.ckptMu.Lock()
	defer l.ckptMu.Unlock()
	for _, tp := range tps {
		if l.ckptParts[tp] {
			return l.writeCheckpointsOf(l.topicsLocked())
		}
	}
	return nil
}

// topicsLocked returns the open topics; the caller holds mu.
func (l *Log) topicsLocked() []*Topic {
	ts := make([]*Topic, 0, len(l.topics))
	for _, t := range l.topics {
		ts = append(ts, t)
	}
	return ts
}

// writeCheckpointsOf writes the checkpoints of topics; the caller holds
// ckptMu.
func (l *Log) writeCheckpointsOf(topics []*Topic) error {
	rp := map[recovery.TopicPartition]record.Offset{}
	ls := map[recovery.TopicPartition]record.Offset{}
	for _, t := range topics {
		t.checkpoints(rp, ls) // each recovery point read before its log start
	}
	// The log start first, and the recovery point only once it is durable.
	// A recovery point can vouch for offsets that were never fsynced: those
	// of segments retention detached before a flush (Partition.Sync flushes
	// the segments the partition still has). Such offsets are below the log
	// start read after it, so with the log start durable first a crash can
	// never leave a recovery point that vouches for visible, unsynced data.
	if err := recovery.WriteCheckpoint(l.fs, filepath.Join(l.dir, layout.LogStartFile), ls); err != nil {
		return err
	}
	if err := recovery.WriteCheckpoint(l.fs, filepath.Join(l.dir, layout.RecoveryPointFile), rp); err != nil {
		return err
	}
	l.ckptParts = checkpointParts(rp, ls)
	return nil
}

// checkpointParts returns the partitions with entries in checkpoints.
func checkpointParts(ckpts ...map[recovery.TopicPartition]record.Offset) map[recovery.TopicPartition]bool {
	parts := map[recovery.TopicPartition]bool{}
	for _, m := range ckpts {
		for tp := range m {
			parts[tp] = true
		}
	}
	return parts
}

// Close shuts the log down cleanly: flush and close every partition, write
// the checkpoints, then the clean-shutdown marker, so the next Open reads
// no log data. If anything fails the marker is not written and the next
// Open recovers.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.bg.Wait()
	err := l.closeTopics()
	if !l.opts.ReadOnly {
		if err == nil {
			err = l.writeCheckpoints()
		}
		// Nothing writes the checkpoints after these: a Sync, or a cluster
		// copy's AdvanceStart through a handle kept, would write them over
		// whatever the next process to take the directory wrote. A write
		// that began before is waited for (ckptMu).
		l.mu.Lock()
		l.ckptDone = true
		l.mu.Unlock()
		l.ckptMu.Lock()
		l.ckptMu.Unlock() // a barrier: the writes begun before are done
		// The delayed deletes before the marker, the last write: the next
		// process may take the directory as soon as the marker is there.
		l.runPendingDeletes()
		if err == nil {
			err = recovery.WriteCleanShutdownMarker(l.fs, l.dir)
		}
		err = errors.Join(err, l.lock.Close())
	}
	return err
}

func (l *Log) closeTopics() error {
	var errs []error
	for _, t := range l.allTopics() {
		errs = append(errs, t.close())
	}
	return errors.Join(errs...)
}

// retentionFirstDelay is how soon after Open retention first runs, unless
// its interval is shorter: Kafka's log.initial.task.delay.ms.
const retentionFirstDelay = 30 * time.Second

// background runs the flusher (flush.ms), the checkpoint writer and
// retention until Close.
func (l *Log) background() {
	defer l.bg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastCheckpoint := l.now()
	// Retention runs as if it had last run that long ago that its first run
	// comes after retentionFirstDelay (or the interval, if shorter).
	lastRetention := lastCheckpoint.Add(-max(l.opts.RetentionCheckInterval-retentionFirstDelay, 0))
	for {
		select {
		case <-l.stop:
			return
		case p := <-l.kick:
			if err := p.Sync(); err != nil && !errors.Is(err, ErrClosed) {
				l.logger.Error("flush after roll", "partition", p.String(), "err", err)
			}
		case <-tick.C:
			now := l.now()
			l.flushDue(now)
			if now.Sub(lastCheckpoint) >= l.opts.CheckpointInterval {
				lastCheckpoint = now
				if err := l.writeCheckpoints(); err != nil {
					l.logger.Error("write checkpoints", "err", err)
				}
			}
			if l.opts.RetentionCheckInterval > 0 && now.Sub(lastRetention) >= l.opts.RetentionCheckInterval {
				lastRetention = now
				if _, err := l.EnforceRetention(); err != nil {
					l.logger.Error("retention", "err", err)
				}
			}
		}
	}
}

// flushDue flushes the partitions whose flush.ms has passed.
func (l *Log) flushDue(now time.Time) {
	for _, t := range l.allTopics() {
		cfg := t.Config()
		for _, p := range t.Partitions() {
			if p.needsFlush(now, cfg) {
				if err := p.Sync(); err != nil && !errors.Is(err, ErrClosed) {
					l.logger.Error("periodic flush", "partition", p.String(), "err", err)
				}
			}
		}
	}
}

// flushSoon asks the background flusher to flush p (after a roll).
func (l *Log) flushSoon(p *Partition) {
	select {
	case l.kick <- p:
	default: // the periodic flush will get to it
	}
}

// EnforceRetention deletes what retention.ms and retention.bytes condemn in
// every partition now, and returns how many segments went.
//
// A partition's condemned segments leave it at once; the log start offsets
// that hide them are written to the checkpoint, durably, before any of
// their files is renamed. A crash can keep any subset of the renames (each
// is its own directory operation), and recovery honours the checkpointed
// log start, so no subset can leave a hole in the visible log. If the
// checkpoint cannot be written, the files stay where they are: after a
// restart the segments are back, under the old log start.
func (l *Log) EnforceRetention() (int, error) {
	type condemned struct {
		p     *Partition
		segs  []*segment
		delay time.Duration
	}
	var all []condemned
	var errs []error
	now := l.now()
	topics := l.allTopics()
	l.retentionPoint("listed")
	for _, t := range topics {
		delay := time.Duration(t.Config().FileDeleteDelayMs) * time.Millisecond
		for _, p := range t.Partitions() {
			segs, err := p.detachExpired(now)
			errs = append(errs, err)
			if len(segs) > 0 {
				all = append(all, condemned{p, segs, delay})
			}
		}
	}
	l.retentionPoint("detached")
	if len(all) == 0 {
		return 0, errors.Join(errs...)
	}
	if err := l.writeCheckpoints(); err != nil {
		for _, c := range all {
			for _, s := range c.segs {
				s.release()
			}
		}
		return 0, errors.Join(append(errs, fmt.Errorf("retention: write the log start offsets first: %w", err))...)
	}
	n := 0
	for _, c := range all {
		n += len(c.segs)
		errs = append(errs, c.p.deleteSegments(c.segs, c.delay))
	}
	return n, errors.Join(errs...)
}

// retentionPoint calls retentionHook, if set.
func (l *Log) retentionPoint(stage string) {
	if l.retentionHook != nil {
		l.retentionHook(stage)
	}
}

// delayedJob is work scheduled by afterDelay.
type delayedJob struct {
	fn    func()
	timer *time.Timer
}

// afterDelay runs fn after d, or during Close if that comes first: the
// delayed unlink of deleted segments (file.delete.delay.ms).
func (l *Log) afterDelay(d time.Duration, fn func()) {
	j := &delayedJob{fn: fn}
	l.delMu.Lock()
	defer l.delMu.Unlock()
	l.pending[j] = struct{}{}
	j.timer = time.AfterFunc(d, func() { l.runJob(j) })
}

// runJob runs a delayed job once, whichever of its timer and Close gets
// there first.
func (l *Log) runJob(j *delayedJob) {
	l.delMu.Lock()
	_, ok := l.pending[j]
	delete(l.pending, j)
	if ok {
		l.running.Add(1)
	}
	l.delMu.Unlock()
	if ok {
		j.fn()
		l.running.Done()
	}
}

func (l *Log) runPendingDeletes() {
	l.delMu.Lock()
	jobs := make([]*delayedJob, 0, len(l.pending))
	for j := range l.pending {
		jobs = append(jobs, j)
	}
	l.delMu.Unlock()
	for _, j := range jobs {
		j.timer.Stop()
		l.runJob(j)
	}
	l.running.Wait()
}
