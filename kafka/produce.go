package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// Appends go out as an idempotent producer (KIP-98) that logfs runs
// itself, on kmsg: franz-go's kgo producer cuts batches as it likes, and
// a write must know which batches hold its lines.
//
// Each partition has a stream: a producer id and epoch of its own, the
// sequence number of its next batch, and up to maxInFlight batches sent
// and not yet answered. A write's lines are cut into as few batches of at
// most max.message.bytes as they need, of even sizes (so that no tiny
// remainder costs a round trip of its own), and its batches are sent one
// after the other without waiting; the write returns once all of them are
// answered.
//
// The broker appends a batch only when its sequence number follows the
// last one it appended for the producer, so batches land in the order
// they were numbered, whatever order the requests arrive in. The rules
// for a batch that is not acknowledged:
//   - A retriable error (a moved leader, a lost connection, a timed-out
//     request) sends the same bytes again: the broker answers a batch it
//     already has as a duplicate, so a retry never appends twice.
//   - OUT_OF_ORDER_SEQUENCE (and UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH)
//     says the batch was not appended. Once every batch numbered before it
//     is answered, it is sent again: with the same bytes if they all went
//     in (it had only overtaken one of them), else under the next epoch
//     with new numbers (one of them failed, so its number can never
//     follow). Never when an attempt of it might have been appended, and
//     never when an earlier batch of the same write failed: that write
//     returns short, and the writer sends those lines again.
//   - Any failure (refused, or not acknowledged by delivery.timeout.ms)
//     bumps the stream's epoch. A broker refuses batches of an older epoch
//     once it has one of a newer, so a batch whose fate was not known
//     cannot land after the batches sent after it.
// A write returns the records of its batches acknowledged in order, up to
// the first that failed: all of them, a short count, or the first
// failure's error.

// maxInFlight is how many batches of one partition may be sent and not
// answered: the five a Kafka broker remembers per producer to tell a
// retry from a new batch.
const maxInFlight = 5

// stream is the idempotent producer state of one partition.
type stream struct {
	c *Cluster
	p *part

	initMu sync.Mutex // one InitProducerID at a time

	// sending is held (a token in it) while one write's batches are
	// numbered and sent, so that they follow each other, never
	// interleaved with another write's (the append and append.jsonl of a
	// partition are two inodes, which the kernel does not serialize). A
	// channel, so that a writer waiting for it can be interrupted.
	sending chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond      // signalled when a batch is answered for good or numbered again
	changed chan struct{}   // GUARDED_BY(mu): closed and replaced at the same moments
	id      int64           // GUARDED_BY(mu): -1 until InitProducerID
	epoch   int16           // GUARDED_BY(mu)
	next    int32           // GUARDED_BY(mu): sequence number of the next batch
	issued  uint64          // GUARDED_BY(mu): batches sent so far, for their order
	open    map[*batch]bool // GUARDED_BY(mu): sent and not answered for good
}

func newStream(c *Cluster, p *part) *stream {
	st := &stream{c: c, p: p, sending: make(chan struct{}, 1), changed: make(chan struct{}), id: -1, open: map[*batch]bool{}}
	st.cond = sync.NewCond(&st.mu)
	return st
}

// write is one Produce call's batches.
type write struct {
	failed bool // GUARDED_BY(stream.mu): a batch of it failed; no later one is sent again
}

// batch is one produce batch and what became of it.
type batch struct {
	w        *write
	b        record.Builder
	n        int // records
	deadline time.Time

	// GUARDED_BY(stream.mu) from its first send on:
	order     uint64 // when it was first sent: its place among the batches
	id        int64  // what its bytes are numbered as
	epoch     int16
	seq       int32
	raw       []byte
	uncertain bool // an attempt may have been appended (no answer, or REQUEST_TIMED_OUT)
	overtook  bool // sent again unchanged after OUT_OF_ORDER_SEQUENCE

	done chan struct{} // closed once base and err are final
	base record.Offset
	err  error
}

// Produce appends recs, in order, in as few batches as the topic's
// max.message.bytes allows, and returns how many were acknowledged by
// every in-sync replica (acks=all): all of them, or the first ones and no
// error (a short write: the records after them were not appended), or
// none and the error. When the batch after the first ones failed but may
// have been appended (ETIMEDOUT, or EIO after an attempt that got no
// answer), it returns the first ones and that error: the rest must not be
// sent again. Batches are uncompressed unless compression.type
// says otherwise; timestamps of 0 get the wall clock. A record that alone
// does not fit a batch fails with ErrRecordTooLarge (EFBIG), and so does
// MESSAGE_TOO_LARGE from the broker. A batch not acknowledged within
// delivery.timeout.ms fails with ErrTimeout (ETIMEDOUT) and is not sent
// again; as with any Kafka producer it may still have been appended. Once
// a batch was sent, Produce waits for its answer even when ctx ends, so
// that what it returns is true: an interrupted write that returned EINTR
// after its records were appended would be written twice by a writer
// that tries again; except when ctx ends with a cause that is
// storage.ErrClosed (a mount that gives up its last appends as it stops):
// Produce then returns at once with that error, the records perhaps
// appended. A record file opened after Produce returned shows the
// records.
func (c *Cluster) Produce(ctx context.Context, cp *storage.Partition, recs []storage.Record) (int, error) {
	n, _, err := c.ProduceAt(ctx, cp, recs)
	return n, err
}

// ProduceAt is Produce, also returning the offset of the first record
// taken (-1 when the broker answered a retry as a duplicate and did not
// say).
func (c *Cluster) ProduceAt(ctx context.Context, cp *storage.Partition, recs []storage.Record) (int, record.Offset, error) {
	if len(recs) == 0 {
		return 0, -1, nil
	}
	p, err := c.partOf(ctx, cp)
	if err != nil {
		return 0, -1, err
	}
	limit := cp.Topic().Config().MaxMessageBytes
	n, base, failed, err := c.produceCut(ctx, p, recs, limit)
	if errors.Is(failed, kerr.MessageTooLarge) && c.refreshLimit(ctx, p, cp, limit) && n == 0 && len(recs) > 1 {
		// The topic's max.message.bytes was lowered on the cluster since
		// the copy learned it, and nothing went in: cut the records again
		// to the new limit, once. (After a short write the writer sends
		// the rest, which is cut to the new limit.)
		n, base, _, err = c.produceCut(ctx, p, recs, cp.Topic().Config().MaxMessageBytes)
	}
	return n, base, err
}

// RefreshLimit reads the topic's max.message.bytes on the cluster again,
// into the copy's topic, and reports whether it changed: the mount asks
// before it refuses a line as over the limit the copy learned, which the
// cluster may have raised since. It asks the cluster at most once a
// second per partition; a line refused meanwhile is refused.
func (c *Cluster) RefreshLimit(ctx context.Context, cp *storage.Partition) bool {
	p, err := c.partOf(ctx, cp)
	if err != nil {
		return false
	}
	p.mu.Lock()
	asked := time.Since(p.limitAsked) < time.Second
	if !asked {
		p.limitAsked = time.Now()
	}
	p.mu.Unlock()
	if asked {
		return false
	}
	return c.refreshLimit(ctx, p, cp, cp.Topic().Config().MaxMessageBytes)
}

// refreshLimit reads the cluster topic's max.message.bytes again after a
// batch of at most limit bytes was refused as too large, and gives it to
// the copy's topic, so that the mount's framing and batches follow it. It
// reports whether the limit changed.
func (c *Cluster) refreshLimit(ctx context.Context, p *part, cp *storage.Partition, limit int64) bool {
	o := c.topicOverrides(ctx, p.topic)
	v, ok := o["max.message.bytes"]
	if !ok || v == limit {
		return false
	}
	if err := cp.Topic().SetConfig(o); err != nil {
		c.logger.Warn("kafka: cannot store the topic's new max.message.bytes in the copy", "topic", p.topic, "err", err)
		return false
	}
	c.logger.Info("kafka: the topic's max.message.bytes changed on the cluster", "topic", p.topic, "was", limit, "now", v)
	return true
}

// produceCut is ProduceAt with the records cut into batches of at most
// limit bytes; failed is the first batch failure, also when the write was
// short.
func (c *Cluster) produceCut(ctx context.Context, p *part, recs []storage.Record, limit int64) (n int, base record.Offset, failed, err error) {
	w := &write{}
	batches, err := cut(recs, limit, w, time.Now().Add(c.s.deliveryTimeout))
	if err != nil {
		return 0, -1, nil, fmt.Errorf("%w of %s", err, p)
	}
	st := p.stream
	select {
	case st.sending <- struct{}{}:
	case <-ctx.Done():
		return 0, -1, nil, c.ctxError(ctx, "append to "+p.String(), ctx.Err())
	}
	var sendErr error
	for _, b := range batches {
		if sendErr = st.send(ctx, b); sendErr != nil {
			break
		}
	}
	<-st.sending
	taken := 0
	base = -1
	var first error
	var firstBatch *batch
	// Every batch sent is answered for good before any is judged: a
	// later batch's err is read below, and is nil until then. Only a
	// caller that gives up as it closes (see Produce) stops waiting.
	for _, b := range batches {
		if b.done == nil {
			break // not sent
		}
		if err := waitAnswer(ctx, b); err != nil {
			err = fmt.Errorf("append to %s: %w; it was sent and not acknowledged, and may still be appended", p, err)
			return 0, -1, err, err
		}
	}
	for i, b := range batches {
		if b.done == nil {
			break // not sent
		}
		ok := b.err == nil
		if !ok {
			// A later batch numbered in the same epoch that went in says
			// this one went in first (its answer was lost).
			for _, later := range batches[i+1:] {
				if later.done != nil && later.err == nil && later.id == b.id && later.epoch == b.epoch {
					ok = true
				}
			}
		}
		if !ok {
			if first == nil {
				first, firstBatch = b.err, b
			}
			continue
		}
		if first == nil {
			if i == 0 {
				base = b.base
			}
			taken += b.n
		}
	}
	if taken > 0 {
		// The next lookup asks the cluster again, so a file opened now
		// ends past these records.
		p.mu.Lock()
		p.producedAt = time.Now()
		p.mu.Unlock()
		if firstBatch != nil && firstBatch.uncertain {
			// The batch that failed may have been appended (no answer,
			// or REQUEST_TIMED_OUT): a short write alone would have the
			// writer send its records again, a second copy.
			return taken, base, first, first
		}
		return taken, base, first, nil
	}
	if first == nil {
		first = sendErr
	}
	return 0, -1, first, first
}

// waitAnswer waits until b is answered for good, or until ctx ends with a
// cause that is storage.ErrClosed, which it returns: the caller gives up
// as it closes, and nobody will send the records again. The batch's
// retries go on (the stream's numbering stays whole); only the wait ends.
func waitAnswer(ctx context.Context, b *batch) error {
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		select {
		case <-b.done: // answered too: the select above picks either
			return nil
		default:
		}
		if cause := context.Cause(ctx); errors.Is(cause, storage.ErrClosed) {
			return cause
		}
	}
	<-b.done
	return nil
}

// cut builds recs into batches of at most limit bytes each: as few as
// the records need, and each about as big as the others.
func cut(recs []storage.Record, limit int64, w *write, deadline time.Time) ([]*batch, error) {
	nowMs := time.Now().UnixMilli()
	const slack = 16 // varint deltas of a record in a batch, at most
	sizes := make([]int64, len(recs))
	var total int64
	for i := range recs {
		r := &recs[i]
		sizes[i] = int64(record.RecordSize(0, int32(i), r.Key, r.Value, r.Headers)) + slack
		if record.HeaderSize+sizes[i] > limit {
			return nil, fmt.Errorf("%w: a record of %d bytes, over max.message.bytes (%d)", storage.ErrRecordTooLarge, record.HeaderSize+sizes[i]-slack, limit)
		}
		total += sizes[i]
	}
	// How many batches a greedy cut needs; then aim each at an equal part.
	need, fill := int64(1), int64(record.HeaderSize)
	for _, s := range sizes {
		if fill+s > limit {
			need, fill = need+1, record.HeaderSize
		}
		fill += s
	}
	target := record.HeaderSize + (total+need-1)/need
	var out []*batch
	var cur *batch
	fill = 0
	for i := range recs {
		if cur == nil || fill+sizes[i] > limit || fill >= target {
			cur = &batch{w: w, deadline: deadline}
			cur.b.Reset()
			cur.b.Grow(int(min(target, limit)))
			out = append(out, cur)
			fill = record.HeaderSize
		}
		r := &recs[i]
		ts := r.Timestamp
		if ts == 0 {
			ts = nowMs
		}
		cur.b.Append(ts, r.Key, r.Value, r.Headers)
		cur.n++
		fill += sizes[i]
	}
	return out, nil
}

// send numbers b and sends it, after the batches sent before it. It
// fails, sending nothing, when ctx ends or the deadline passes first, and
// sends nothing when an earlier batch of the same write failed.
func (st *stream) send(ctx context.Context, b *batch) error {
	dctx, cancel := context.WithDeadlineCause(ctx, b.deadline, ErrTimeout)
	defer cancel()
	if err := st.ensureID(dctx); err != nil {
		return err
	}
	st.mu.Lock()
	for !st.mayNumberLocked() {
		ch := st.changed
		st.mu.Unlock()
		select {
		case <-ch:
		case <-dctx.Done():
			return st.c.ctxError(dctx, "append to "+st.p.String(), dctx.Err())
		}
		st.mu.Lock()
	}
	defer st.mu.Unlock()
	if b.w.failed {
		return nil // the write's result is its earlier batch's failure
	}
	if err := st.numberLocked(b); err != nil {
		return err
	}
	b.order = st.issued
	st.issued++
	b.done = make(chan struct{})
	st.open[b] = true
	go st.run(b)
	return nil
}

// mayNumberLocked reports whether the next batch may be numbered and sent
// now: it is within maxInFlight of the oldest batch not answered for good
// (so that a retry of that one is still among the batches the broker
// remembers, and is answered as a duplicate), and no batch numbered in a
// failed epoch waits to be numbered again (a new batch would land before
// it).
func (st *stream) mayNumberLocked() bool {
	if st.id < 0 {
		return true // numberLocked says why not
	}
	for o := range st.open {
		if st.issued-o.order >= maxInFlight || o.id != st.id || o.epoch != st.epoch {
			return false
		}
	}
	return true
}

// ensureID gets the stream a producer id, once (InitProducerID), and
// again after its epochs ran out.
func (st *stream) ensureID(ctx context.Context) error {
	st.initMu.Lock()
	defer st.initMu.Unlock()
	st.mu.Lock()
	have := st.id >= 0
	st.mu.Unlock()
	if have {
		return nil
	}
	backoff := st.c.s.retryBackoff
	for {
		id, epoch, err := st.c.initProducerID(ctx)
		if err == nil {
			st.mu.Lock()
			st.id, st.epoch, st.next = id, epoch, 0
			st.mu.Unlock()
			return nil
		}
		if !retriable(err) || !sleepCtx(ctx, backoff) {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// initProducerID asks for a producer id of an idempotent producer.
func (c *Cluster) initProducerID(ctx context.Context) (int64, int16, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return 0, 0, c.ctxError(ctx, "init producer id", err)
	}
	if err := brokerError("init producer id", resp.ErrorCode, nil); err != nil {
		return 0, 0, err
	}
	return resp.ProducerID, resp.ProducerEpoch, nil
}

// numberLocked gives b the stream's next sequence numbers and builds its
// bytes with them.
func (st *stream) numberLocked(b *batch) error {
	if st.id < 0 {
		return fmt.Errorf("append to %s: no producer id (%w)", st.p, syscall.EIO)
	}
	raw, err := b.b.BuildWith(record.BuildOptions{Compression: st.c.s.compression, ProducerID: st.id, ProducerEpoch: st.epoch, BaseSequence: st.next})
	if err != nil {
		return err
	}
	b.id, b.epoch, b.seq, b.raw = st.id, st.epoch, st.next, raw
	s := int64(st.next) + int64(b.n)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1 // Kafka's sequence numbers wrap to 0
	}
	st.next = int32(s)
	return nil
}

// bumpLocked moves the stream past epoch of id after a batch of it
// failed: the next batch starts the next epoch at sequence 0, and the
// broker refuses the failed epoch's batches from then on.
func (st *stream) bumpLocked(id int64, epoch int16) {
	if st.id != id || st.epoch != epoch {
		return // bumped already
	}
	if st.epoch == math.MaxInt16 {
		st.id = -1 // a new producer id
		return
	}
	st.epoch++
	st.next = 0
}

// run sends b until it is answered for good.
func (st *stream) run(b *batch) {
	c := st.c
	op := "append to " + st.p.String()
	backoff := c.s.retryBackoff
	var lastErr error
	for {
		if time.Now().After(b.deadline) {
			st.resolve(b, -1, c.timeoutError(op, lastErr))
			return
		}
		resp, err := st.request(b)
		if err == nil {
			err = produceError(op, resp)
		}
		switch {
		case err == nil:
			st.resolve(b, baseOffset(resp), nil)
			return
		case errors.Is(err, kerr.DuplicateSequenceNumber):
			st.resolve(b, -1, nil)
			return
		case errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID), errors.Is(err, kerr.InvalidProducerEpoch):
			if !st.again(b, err) {
				return
			}
		case errors.Is(err, ErrClosed), errors.Is(c.ctx.Err(), context.Canceled):
			st.resolve(b, -1, fmt.Errorf("%s: %w", op, ErrClosed))
			return
		case retriable(err):
			lastErr = err
			if !errors.As(err, new(*kerr.Error)) || errors.Is(err, kerr.RequestTimedOut) || errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
				st.mu.Lock()
				b.uncertain = true // no answer, or one that says it may be there
				st.mu.Unlock()
			}
			go c.refreshSoon()
			sleepUntil(c, backoff, b.deadline) // past it, the check above ends b
			backoff = min(2*backoff, time.Second)
		default:
			st.resolve(b, -1, err)
			return
		}
	}
}

// request sends b's bytes once to the partition's leader.
func (st *stream) request(b *batch) (*kmsg.ProduceResponse, error) {
	c, p := st.c, st.p
	st.mu.Lock()
	raw := b.raw
	st.mu.Unlock()
	p.mu.Lock()
	leader, topicID := p.leader, p.topicID
	p.mu.Unlock()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = int32(c.s.requestTimeout.Milliseconds())
	t := kmsg.NewProduceRequestTopic()
	t.Topic, t.TopicID = p.topic, topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p.id, raw
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	// Not the writer's context: once sent, the answer is waited for.
	ctx, cancel := context.WithDeadline(c.ctx, minTime(b.deadline, time.Now().Add(c.s.requestTimeout)))
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl.Broker(int(leader)))
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, clientError("append to "+p.String(), err)
	}
	return resp, nil
}

// again decides, after the broker said b was not appended (err), whether
// to send it again: it waits until every batch sent before b is answered
// for good, since they decide b's numbers. It returns false when b is
// answered for good instead.
func (st *stream) again(b *batch, err error) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.earlierOpenLocked(b) {
		st.cond.Wait()
	}
	op := "append to " + st.p.String()
	switch {
	case b.w.failed:
		st.resolveLocked(b, -1, fmt.Errorf("%s: not appended, after an earlier batch of the same write failed (%w)", op, syscall.EIO))
		return false
	case b.uncertain:
		st.resolveLocked(b, -1, fmt.Errorf("%s: %w; not sent again, as an earlier attempt may have been appended (%w)", op, err, syscall.EIO))
		return false
	case errors.Is(err, kerr.OutOfOrderSequenceNumber) && !b.overtook && b.id == st.id && b.epoch == st.epoch:
		// It overtook a batch sent before it, which is in now.
		b.overtook = true
		return true
	}
	// Its numbers can no longer follow (an earlier batch failed, or the
	// broker lost this producer): the next epoch, new numbers.
	st.bumpLocked(b.id, b.epoch)
	if st.id < 0 {
		st.resolveLocked(b, -1, fmt.Errorf("%s: %w; the producer's epochs ran out (%w)", op, err, syscall.EIO))
		return false
	}
	if nerr := st.numberLocked(b); nerr != nil {
		st.resolveLocked(b, -1, nerr)
		return false
	}
	b.overtook = false
	st.signalLocked() // one stale batch fewer
	return true
}

// earlierOpenLocked reports whether a batch sent before b is not yet
// answered for good.
func (st *stream) earlierOpenLocked(b *batch) bool {
	for o := range st.open {
		if o.order < b.order {
			return true
		}
	}
	return false
}

func (st *stream) resolve(b *batch, base record.Offset, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.resolveLocked(b, base, err)
}

// resolveLocked answers b for good. A failure ends its write's later
// batches and bumps the epoch it was numbered in.
func (st *stream) resolveLocked(b *batch, base record.Offset, err error) {
	b.base, b.err = base, err
	if err != nil {
		b.w.failed = true
		st.bumpLocked(b.id, b.epoch)
	}
	delete(st.open, b)
	close(b.done)
	st.signalLocked()
}

// signalLocked wakes whoever waits for a batch to be answered or
// numbered again.
func (st *stream) signalLocked() {
	st.cond.Broadcast()
	close(st.changed)
	st.changed = make(chan struct{})
}

// timeoutError is the error of a batch not acknowledged in time.
func (c *Cluster) timeoutError(op string, last error) error {
	if last != nil {
		return fmt.Errorf("%s: not acknowledged within delivery.timeout.ms (%v): %w; last error: %v", op, c.s.deliveryTimeout, ErrTimeout, last)
	}
	return fmt.Errorf("%s: not acknowledged within delivery.timeout.ms (%v): %w", op, c.s.deliveryTimeout, ErrTimeout)
}

// baseOffset is the offset the broker gave the batch.
func baseOffset(resp *kmsg.ProduceResponse) record.Offset {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return record.Offset(p.BaseOffset)
		}
	}
	return -1
}

// produceError is the error of the one partition of a produce response.
func produceError(op string, resp *kmsg.ProduceResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return brokerError(op, p.ErrorCode, p.ErrorMessage)
		}
	}
	return fmt.Errorf("%s: no answer for the partition (%w)", op, syscall.EIO)
}

// retriable reports whether an append that failed with err may be sent
// again as it is.
func retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.NotLeaderForPartition)
	}
	if errors.Is(err, storage.ErrRecordTooLarge) || errors.Is(err, syscall.EPERM) || errors.Is(err, ErrClosed) {
		return false
	}
	return true // a connection that failed, a broker gone
}

// sleepCtx sleeps d, or less if ctx ends first (then it returns false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sleepUntil sleeps d, or until deadline or Close if sooner (then it
// returns false).
func sleepUntil(c *Cluster, d time.Duration, deadline time.Time) bool {
	left := time.Until(deadline)
	t := time.NewTimer(max(min(d, left), 0))
	defer t.Stop()
	select {
	case <-c.stop:
		return false
	case <-t.C:
		return left > d
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
