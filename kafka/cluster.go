package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/layout"
	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// Defaults of Options.
const (
	// DefaultCopyBytes is the copy's byte budget: beyond it the oldest
	// segments of the partitions read least recently are evicted.
	DefaultCopyBytes = 4 << 30
	// copySegmentBytes is the segment size of the copy: what eviction
	// removes at a time.
	copySegmentBytes = 128 << 20
	// idleFollow is how long a partition is followed after its last use,
	// so that the next open finds the copy caught up.
	idleFollow = 30 * time.Second
)

// Options configure a Cluster.
type Options struct {
	// Brokers are the bootstrap servers, HOST:PORT each (a comma-separated
	// list in one string is split too); empty means bootstrap.servers of
	// Properties.
	Brokers []string
	// Properties are Kafka client properties (--command-config, -X).
	Properties Properties
	// Dir is the copy's data directory; "" means
	// $XDG_CACHE_HOME/logfs/cluster-<cluster id> (~/.cache/logfs/…).
	Dir string
	// CopyBytes is the copy's byte budget; 0 means DefaultCopyBytes.
	CopyBytes int64
	// CopySegmentBytes is the copy's segment size, what eviction removes
	// at a time; 0 means 128 MiB. It must hold the cluster's largest batch.
	CopySegmentBytes int64
	// Logger receives problems, each once; nil means slog.Default().
	Logger *slog.Logger
}

// Cluster is a Kafka cluster seen through a local copy of what was read
// from it: the storage.Log of Log holds, per partition read, a contiguous
// range of its batches exactly as the leader stores them. See doc.go.
type Cluster struct {
	opts   Options
	s      *settings
	cl     *kgo.Client
	adm    *kadm.Client
	copy   *storage.Log
	logger *slog.Logger
	id     string // cluster id

	stop   chan struct{}
	ctx    context.Context // done at Close: ends requests in flight
	cancel context.CancelFunc
	bg     sync.WaitGroup

	// Lock order: Cluster.mu, then part.mu; neither is held while calling
	// the cluster or storage, except copyMu, which serialises changes of
	// the copy's topics and is taken alone.
	mu       sync.Mutex
	meta     *metadata            // GUARDED_BY(mu): the latest metadata
	metaAt   time.Time            // GUARDED_BY(mu)
	parts    map[tpKey]*part      // GUARDED_BY(mu)
	fetchers map[int32]*fetcher   // GUARDED_BY(mu): by broker
	state    map[string]string    // GUARDED_BY(mu): the copy's follower state
	logged   map[string]time.Time // GUARDED_BY(mu): problems logged, to log each once a minute
	closed   bool                 // GUARDED_BY(mu)

	copyMu   sync.Mutex
	evicting atomic.Bool
}

type tpKey struct {
	topic string
	id    int32
}

// metadata is what the cluster said about its topics.
type metadata struct {
	topics map[string]*topicMeta
	names  []string // sorted
}

type topicMeta struct {
	name       string
	id         [16]byte
	partitions []partMeta
}

type partMeta struct {
	leader int32
	epoch  int32
	err    error
}

// Open connects to the cluster, learns its metadata and opens the copy.
func Open(ctx context.Context, o Options) (*Cluster, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CopyBytes <= 0 {
		o.CopyBytes = DefaultCopyBytes
	}
	if o.CopySegmentBytes <= 0 {
		o.CopySegmentBytes = copySegmentBytes
	}
	s, err := o.Properties.parse(o.Brokers)
	if err != nil {
		return nil, err
	}
	for _, name := range s.ignored {
		o.Logger.Warn("kafka: client property not used", "property", name)
	}
	cl, err := kgo.NewClient(s.opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	c := &Cluster{opts: o, s: s, cl: cl, adm: kadm.NewClient(cl), logger: o.Logger, stop: make(chan struct{}),
		parts: map[tpKey]*part{}, fetchers: map[int32]*fetcher{}, logged: map[string]time.Time{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// The first contact gives up sooner than default.api.timeout.ms: a
	// wrong address or a refused login is better said at once.
	first, cancel := context.WithTimeout(ctx, min(s.apiTimeout, 15*time.Second))
	defer cancel()
	if err := c.refresh(first); err != nil {
		c.cancel()
		cl.Close()
		return nil, fmt.Errorf("cannot reach the cluster at %s: %w", strings.Join(s.brokers, ","), err)
	}
	if err := c.openCopy(); err != nil {
		c.cancel()
		cl.Close()
		return nil, err
	}
	c.bg.Add(1)
	go c.background()
	return c, nil
}

// Log returns the copy: serve it (fs.Mount) with the Cluster.
func (c *Cluster) Log() *storage.Log { return c.copy }

// ID returns the cluster id.
func (c *Cluster) ID() string { return c.id }

// Brokers returns the bootstrap servers.
func (c *Cluster) Brokers() []string { return c.s.brokers }

// Isolation returns the isolation level the copy shows.
func (c *Cluster) Isolation() IsolationLevel { return c.s.isolation }

// Close stops following, closes the connections and closes the copy
// cleanly.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	fetchers := make([]*fetcher, 0, len(c.fetchers))
	for _, f := range c.fetchers {
		fetchers = append(fetchers, f)
	}
	parts := make([]*part, 0, len(c.parts))
	for _, p := range c.parts {
		parts = append(parts, p)
	}
	c.mu.Unlock()
	close(c.stop)
	c.cancel()
	for _, f := range fetchers {
		f.wait()
	}
	c.bg.Wait()
	for _, p := range parts {
		p.fetchMu.Lock()
		p.mu.Lock()
		if p.prep != nil {
			p.prep.Abort()
			p.prep = nil
		}
		p.mu.Unlock()
		p.fetchMu.Unlock()
		p.changed()
	}
	c.cl.Close()
	return c.copy.Close()
}

// DefaultDir is where the copy of cluster id lives unless Options.Dir
// says otherwise.
func DefaultDir(id string) string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
	return filepath.Join(base, "logfs", "cluster-"+safe)
}

// copyDefaults are the copy's topic settings: large segments never deleted
// by time or size (the cluster's retention moves the log start, and the
// copy's budget evicts), no fsync (the copy is a cache: after a crash
// recovery cuts what was torn and the follower fetches it again).
func copyDefaults(segmentBytes int64) storage.Overrides {
	o := storage.Overrides{}
	for _, kv := range []string{"segment.bytes=" + strconv.FormatInt(segmentBytes, 10), "retention.ms=-1", "retention.bytes=-1", "flush.ms=-1",
		"max.message.bytes=1048588", "file.delete.delay.ms=10000"} {
		if err := o.SetPair(kv); err != nil {
			panic(err)
		}
	}
	return o
}

// Follower state keys.
const (
	stateClusterID = "cluster.id"
	stateIsolation = "isolation.level"
	stateTopic     = "topic." // + name = base64 topic id
)

// openCopy opens the copy directory and drops what no longer matches the
// cluster: topics deleted or created again (another topic id), and every
// partition when the copy was fetched at another isolation level.
func (c *Cluster) openCopy() error {
	dir := c.opts.Dir
	if dir == "" {
		dir = DefaultDir(c.id)
	}
	// The copy's views show what the mount's isolation level shows (storage
	// filters a read_uncommitted copy's aborted records otherwise).
	iso := storage.ReadCommitted
	if c.s.isolation == ReadUncommitted {
		iso = storage.ReadUncommitted
	}
	l, err := storage.Open(dir, storage.Options{Gaps: true, Logger: c.logger, Defaults: copyDefaults(c.opts.CopySegmentBytes), RetentionCheckInterval: -1, Isolation: iso})
	if err != nil {
		return fmt.Errorf("open the copy %s: %w", dir, err)
	}
	state, err := l.FollowerState()
	if err != nil {
		l.Close()
		return fmt.Errorf("open the copy %s: %w", dir, err)
	}
	if id := state[stateClusterID]; id != "" && id != c.id {
		l.Close()
		return fmt.Errorf("%w: %s holds a copy of cluster %s, not of %s (give another --data)", ErrCopy, dir, id, c.id)
	}
	if len(l.Topics()) > 0 && state[stateClusterID] == "" {
		l.Close()
		return fmt.Errorf("%w: %s holds topics that are not a copy of a cluster (give another --data)", ErrCopy, dir)
	}
	sameLevel := state[stateIsolation] == c.s.isolation.String()
	for _, name := range l.Topics() {
		tm := c.meta.topics[name]
		if tm == nil || state[stateTopic+name] != encodeID(tm.id) || !sameLevel {
			why := "deleted on the cluster"
			if tm != nil {
				why = "created again on the cluster"
			}
			if !sameLevel {
				why = "fetched at isolation level " + state[stateIsolation]
			}
			c.logger.Info("kafka: dropping the copy of a topic", "topic", name, "why", why)
			if err := l.DeleteTopic(name); err != nil {
				l.Close()
				return fmt.Errorf("open the copy %s: drop %s: %w", dir, name, err)
			}
			delete(state, stateTopic+name)
		}
	}
	state[stateClusterID], state[stateIsolation] = c.id, c.s.isolation.String()
	if err := l.SetFollowerState(state); err != nil {
		l.Close()
		return fmt.Errorf("open the copy %s: %w", dir, err)
	}
	c.copy, c.state = l, state
	return nil
}

func encodeID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// background refreshes metadata, keeps the copy within its budget and
// stops following idle partitions.
func (c *Cluster) background() {
	defer c.bg.Done()
	tick := time.NewTicker(c.s.metadataInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		// Under c.ctx: Close, which waits for this loop, ends the request
		// at once, not after request.timeout.ms of a broker that does not
		// answer.
		ctx, cancel := context.WithTimeout(c.ctx, c.s.requestTimeout)
		if err := c.refresh(ctx); err != nil && c.ctx.Err() == nil {
			c.logOnce("metadata", "kafka: metadata refresh failed", "err", err)
		}
		cancel()
		c.evictSoon()
	}
}

// logOnce logs a problem of a kind at most once a minute.
func (c *Cluster) logOnce(kind, msg string, args ...any) {
	c.mu.Lock()
	last, ok := c.logged[kind]
	now := time.Now()
	if ok && now.Sub(last) < time.Minute {
		c.mu.Unlock()
		return
	}
	c.logged[kind] = now
	c.mu.Unlock()
	c.logger.Warn(msg, args...)
}

// refresh asks the cluster for its topics and partition leaders.
func (c *Cluster) refresh(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return clientError("metadata", err)
	}
	m := &metadata{topics: map[string]*topicMeta{}}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := layout.ValidateTopic(*t.Topic); err != nil {
			// Not a name Kafka allows, nor one a file may have ("..",
			// "a/b"): whoever sent it, it stays out of the tree.
			c.logOnce("name "+*t.Topic, "kafka: the cluster lists a topic whose name is not a Kafka topic name; leaving it out", "err", err)
			continue
		}
		if err := brokerError("metadata of "+*t.Topic, t.ErrorCode, nil); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				continue // deleted meanwhile
			}
			if !errors.Is(err, kerr.LeaderNotAvailable) {
				c.logOnce("metadata "+*t.Topic, "kafka: topic metadata", "topic", *t.Topic, "err", err)
				continue
			}
		}
		tm := &topicMeta{name: *t.Topic, id: t.TopicID}
		ps := make([]partMeta, len(t.Partitions))
		complete := true
		for _, p := range t.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(ps) {
				complete = false
				continue
			}
			ps[p.Partition] = partMeta{leader: p.Leader, epoch: p.LeaderEpoch, err: brokerError("partition", p.ErrorCode, nil)}
		}
		if !complete {
			continue
		}
		tm.partitions = ps
		m.topics[tm.name] = tm
		m.names = append(m.names, tm.name)
	}
	sort.Strings(m.names)
	c.mu.Lock()
	c.id = ptrOr(resp.ClusterID, c.id)
	c.meta, c.metaAt = m, time.Now()
	moved := c.placePartsLocked()
	c.mu.Unlock()
	for _, p := range moved {
		p.changed()
		p.mu.Lock()
		active := p.activeLocked()
		p.mu.Unlock()
		if active {
			c.follow(p) // the new leader's fetcher takes it
		}
	}
	return nil
}

func ptrOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// placePartsLocked moves followed partitions to their leaders' fetchers
// after new metadata, and marks those of deleted or recreated topics. It
// returns the partitions whose state changed.
func (c *Cluster) placePartsLocked() []*part {
	var changed []*part
	for k, p := range c.parts {
		tm := c.meta.topics[k.topic]
		p.mu.Lock()
		switch {
		case tm == nil || int(k.id) >= len(tm.partitions):
			if p.err == nil || !errors.Is(p.err, storage.ErrNoTopic) {
				p.err = fmt.Errorf("%s partition %d: deleted on the cluster (%w)", k.topic, k.id, storage.ErrNoTopic)
				changed = append(changed, p)
			}
		case tm.id != p.topicID:
			// Created again: the copy is of another topic now.
			p.topicID, p.stale, p.err = tm.id, true, nil
			p.resetAt, p.gen = nil, p.gen+1 // answers about the old topic are dropped
			p.leader, p.epoch = tm.partitions[k.id].leader, tm.partitions[k.id].epoch
			changed = append(changed, p)
		default:
			pm := tm.partitions[k.id]
			if p.leader != pm.leader || p.epoch != pm.epoch {
				p.leader, p.epoch = pm.leader, pm.epoch
				changed = append(changed, p)
			}
			if p.err != nil && errors.Is(p.err, storage.ErrNoTopic) {
				p.err = nil
			}
		}
		p.mu.Unlock()
	}
	return changed
}

// metadataFresh returns metadata no older than age, refreshing it if
// needed; when the cluster cannot be reached it returns what it had.
func (c *Cluster) metadataFresh(ctx context.Context, age time.Duration) (*metadata, error) {
	c.mu.Lock()
	m, at := c.meta, c.metaAt
	c.mu.Unlock()
	if time.Since(at) <= age {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.requestTimeout)
	defer cancel()
	if err := c.refresh(ctx); err != nil {
		if ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
			return nil, err
		}
		c.logOnce("metadata", "kafka: metadata refresh failed; listing what was known", "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta, nil
}

// Topics returns the cluster's topics, sorted, internal ones too, from
// metadata at most a second old.
func (c *Cluster) Topics(ctx context.Context) ([]string, error) {
	m, err := c.metadataFresh(ctx, time.Second)
	if err != nil {
		return nil, err
	}
	return m.names, nil
}

// Partitions returns how many partitions topic has. A topic not known is
// looked for again at once (it may have just been created elsewhere).
func (c *Cluster) Partitions(ctx context.Context, topic string) (int, error) {
	for _, age := range []time.Duration{time.Second, 0} {
		m, err := c.metadataFresh(ctx, age)
		if err != nil {
			return 0, err
		}
		if tm := m.topics[topic]; tm != nil {
			return len(tm.partitions), nil
		}
	}
	return 0, fmt.Errorf("%q: %w", topic, storage.ErrNoTopic)
}

// CreateTopic creates a topic with the brokers' default number of
// partitions and replication factor. Kafka's name rules are checked here
// (layout.ValidateTopic), not left to the broker.
func (c *Cluster) CreateTopic(ctx context.Context, name string) error {
	if err := layout.ValidateTopic(name); err != nil {
		return err
	}
	ctx, cancel := c.apiContext(ctx)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, -1, -1
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = int32(c.s.requestTimeout.Milliseconds())
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return c.ctxError(ctx, "create topic "+name, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("create topic %s: %d topics in the answer (%w)", name, len(resp.Topics), syscall.EIO)
	}
	if err := brokerError("create topic "+name, resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage); err != nil {
		return err
	}
	return c.awaitTopic(ctx, name, 1)
}

// CreatePartition adds partition id to topic; id must be the next number,
// as locally (Kafka only grows a topic).
func (c *Cluster) CreatePartition(ctx context.Context, topic string, id int) error {
	n, err := c.Partitions(ctx, topic)
	if err != nil {
		return err
	}
	if id != n {
		return fmt.Errorf("%w: topic %s has %d partitions, the next is %d, not %d", storage.ErrInvalidPartition, topic, n, n, id)
	}
	ctx, cancel := c.apiContext(ctx)
	defer cancel()
	req := kmsg.NewPtrCreatePartitionsRequest()
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, int32(id+1)
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = int32(c.s.requestTimeout.Milliseconds())
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return c.ctxError(ctx, fmt.Sprintf("create partition %s/%d", topic, id), err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("create partition %s/%d: %d topics in the answer (%w)", topic, id, len(resp.Topics), syscall.EIO)
	}
	if err := brokerError(fmt.Sprintf("create partition %s/%d", topic, id), resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage); err != nil {
		return err
	}
	return c.awaitTopic(ctx, topic, id+1)
}

// awaitTopic waits until metadata shows topic with n partitions: brokers
// answer CreateTopics before every broker knows of it.
func (c *Cluster) awaitTopic(ctx context.Context, topic string, n int) error {
	for {
		m, err := c.metadataFresh(ctx, 0)
		if err != nil {
			return err
		}
		if tm := m.topics[topic]; tm != nil && len(tm.partitions) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return c.ctxError(ctx, "wait for topic "+topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// apiContext bounds a call to the cluster by default.api.timeout.ms.
func (c *Cluster) apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.s.apiTimeout, ErrTimeout)
}

// ctxError is err, or ErrTimeout when the api timeout (not the caller)
// ended the call.
func (c *Cluster) ctxError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrTimeout) {
		return fmt.Errorf("%s: %w after %v", op, ErrTimeout, c.s.apiTimeout)
	}
	return clientError(op, err)
}

// part returns the follower state of a partition, creating the copy's
// topic and partition on first use.
func (c *Cluster) part(ctx context.Context, topic string, id int) (*part, error) {
	if id < 0 || id > math.MaxInt32 {
		// Kafka numbers partitions with an int32: 4294967296 must not
		// be partition 0.
		return nil, fmt.Errorf("%s partition %d: %w", topic, id, storage.ErrNoPartition)
	}
	k := tpKey{topic, int32(id)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if p := c.parts[k]; p != nil {
		c.mu.Unlock()
		return p, nil
	}
	c.mu.Unlock()
	n, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	if id < 0 || id >= n {
		return nil, fmt.Errorf("%s partition %d: %w", topic, id, storage.ErrNoPartition)
	}
	cp, err := c.copyPartition(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.parts[k]; p != nil {
		return p, nil
	}
	p := newPart(c, topic, int32(id), cp)
	if tm := c.meta.topics[topic]; tm != nil && id < len(tm.partitions) {
		p.topicID, p.leader, p.epoch = tm.id, tm.partitions[id].leader, tm.partitions[id].epoch
		// The copy on disk may be of an older topic of this name, created
		// again since the copy was opened and before this partition was
		// first used (placePartsLocked sees only partitions in use): start
		// it again at the first read instead of serving, or continuing,
		// the old topic's records. The state keeps the old id, so that the
		// topic's other partitions are found out too.
		if was := c.state[stateTopic+topic]; was != "" && was != encodeID(tm.id) {
			p.stale = true
		}
	}
	c.parts[k] = p
	return p, nil
}

// copyPartition returns the copy's partition, creating the topic and the
// partitions up to it (empty: nothing is fetched until it is read).
func (c *Cluster) copyPartition(ctx context.Context, topic string, id int) (*storage.Partition, error) {
	c.copyMu.Lock()
	defer c.copyMu.Unlock()
	t, err := c.copy.Topic(topic)
	if errors.Is(err, storage.ErrNoTopic) {
		c.mu.Lock()
		tm := c.meta.topics[topic]
		c.mu.Unlock()
		if tm == nil {
			return nil, fmt.Errorf("%q: %w", topic, storage.ErrNoTopic)
		}
		if t, err = c.copy.CreateTopic(topic, 1, c.topicOverrides(ctx, topic)); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.state[stateTopic+topic] = encodeID(tm.id)
		state := make(map[string]string, len(c.state))
		for k, v := range c.state {
			state[k] = v
		}
		c.mu.Unlock()
		if err := c.copy.SetFollowerState(state); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	for len(t.Partitions()) <= id {
		if _, err := t.AddPartition(len(t.Partitions())); err != nil {
			return nil, err
		}
	}
	return t.Partition(id)
}

// topicOverrides are the copy topic's settings: max.message.bytes is the
// cluster topic's, so that the mount's line framing refuses what the
// brokers would refuse before producing anything.
func (c *Cluster) topicOverrides(ctx context.Context, topic string) storage.Overrides {
	o := storage.Overrides{}
	ctx, cancel := context.WithTimeout(ctx, c.s.requestTimeout)
	defer cancel()
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		c.logOnce("configs "+topic, "kafka: cannot read the topic's settings; assuming max.message.bytes=1048588", "topic", topic, "err", err)
		return o
	}
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Key == "max.message.bytes" && cfg.Value != nil {
				if err := o.SetPair("max.message.bytes=" + *cfg.Value); err != nil {
					c.logOnce("configs "+topic, "kafka: bad max.message.bytes", "topic", topic, "value", *cfg.Value)
				}
			}
		}
	}
	return o
}

// evictSoon runs evict when the copy may be over its budget, at most one
// at a time: fetchers call it after each answer, so the budget holds while
// a large partition is being copied too.
func (c *Cluster) evictSoon() {
	if c.copy == nil || !c.evicting.CompareAndSwap(false, true) {
		return
	}
	defer c.evicting.Store(false)
	var total int64
	c.mu.Lock()
	for _, p := range c.parts {
		total += p.cp.Size()
	}
	c.mu.Unlock()
	if total > c.opts.CopyBytes {
		c.evict()
	}
}

// evict keeps the copy within its byte budget: it removes the oldest
// segment of the partition read least recently, over and over, never a
// partition's last segment nor one a reader holds (below the first offset
// of its holds). When only held bytes are left the copy stays over budget
// and says so once.
func (c *Cluster) evict() {
	for {
		c.mu.Lock()
		parts := make([]*part, 0, len(c.parts))
		for _, p := range c.parts {
			parts = append(parts, p)
		}
		c.mu.Unlock()
		var total int64
		var victim *part
		var victimUse time.Time
		var cut record.Offset
		for _, p := range parts {
			total += p.cp.Size()
			bases := p.cp.SegmentBases()
			if len(bases) < 2 {
				continue
			}
			p.mu.Lock()
			floor, use := p.floorLocked(), p.lastUse
			p.mu.Unlock()
			if bases[1] > floor {
				continue
			}
			if victim == nil || use.Before(victimUse) {
				victim, victimUse, cut = p, use, bases[1]
			}
		}
		if total <= c.opts.CopyBytes {
			return
		}
		if victim == nil {
			c.logOnce("budget", "kafka: the copy is over its byte budget, all of it held by open files", "bytes", total, "budget", c.opts.CopyBytes)
			return
		}
		victim.fetchMu.Lock()
		// A reader may have come since the floor was taken: look again,
		// and mark the cut so that one coming now waits for it (await).
		victim.mu.Lock()
		held := victim.floorLocked() < cut
		if !held {
			victim.evicting = cut
		}
		victim.mu.Unlock()
		var err error
		if !held {
			_, err = victim.cp.AdvanceStart(max(cut, victim.cp.StartOffset()))
			victim.mu.Lock()
			victim.evicting = 0
			victim.mu.Unlock()
		}
		victim.fetchMu.Unlock()
		victim.changed()
		if held {
			continue
		}
		if err != nil {
			c.logOnce("evict "+victim.String(), "kafka: cannot evict from the copy", "partition", victim.String(), "err", err)
			return
		}
		c.logger.Debug("kafka: evicted the oldest segment of the copy", "partition", victim.String(), "start", cut)
	}
}
