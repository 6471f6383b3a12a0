package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// fetcher follows the partitions one broker leads, with one fetch request
// at a time for all of them, as a Kafka follower's fetcher thread does:
// the broker answers a connection's requests in order, so a long poll for
// one partition would hold up every other.
type fetcher struct {
	c      *Cluster
	broker int32
	wake   chan struct{}
	done   chan struct{}
}

// follow makes sure the fetcher of p's leader is running and looks at p.
func (c *Cluster) follow(p *part) {
	p.mu.Lock()
	leader := p.leader
	p.mu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	f := c.fetchers[leader]
	if f == nil {
		f = &fetcher{c: c, broker: leader, wake: make(chan struct{}, 1), done: make(chan struct{})}
		c.fetchers[leader] = f
		go f.run()
	}
	c.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// wakeAll wakes every fetcher: leaders moved.
func (c *Cluster) wakeAll() {
	c.mu.Lock()
	fs := make([]*fetcher, 0, len(c.fetchers))
	for _, f := range c.fetchers {
		fs = append(fs, f)
	}
	c.mu.Unlock()
	for _, f := range fs {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

func (f *fetcher) wait() { <-f.done }

// fetchPos is what one partition of a fetch request asked for.
type fetchPos struct {
	p      *part
	offset record.Offset
	gen    uint64
	reset  bool
	prep   bool // the copy grows backwards from offset
	// epoch is the leader epoch of the batch that ends at offset, or -1
	// when the fetch names none (LastFetchedEpoch).
	epoch int32
	sent  time.Time // when the request left: what the answer is as fresh as
}

// parts returns the partitions to fetch now and whether any is behind
// (then the fetch does not wait for new data).
func (f *fetcher) parts() ([]fetchPos, bool) {
	c := f.c
	c.mu.Lock()
	all := make([]*part, 0, len(c.parts))
	for _, p := range c.parts {
		all = append(all, p)
	}
	c.mu.Unlock()
	var out []fetchPos
	behind := false
	for _, p := range all {
		p.mu.Lock()
		if p.leader == f.broker && p.activeLocked() {
			fp := fetchPos{p: p, gen: p.gen, epoch: -1}
			switch {
			case p.resetAt != nil:
				fp.offset, fp.reset = *p.resetAt, true
			case p.prepFrom != nil && p.prep == nil:
				fp.offset, fp.prep = *p.prepFrom, true
			case p.prep != nil:
				fp.offset, fp.prep = p.prepAt, true
			case p.fetchAt >= 0:
				fp.offset = max(p.fetchAt, p.cp.EndOffset())
			default:
				fp.offset = p.cp.EndOffset()
			}
			if fp.reset || fp.prep || fp.offset < p.want {
				behind = true
			}
			keptEnd := false
			if !fp.reset && !fp.prep {
				if fp.offset == p.lastEnd {
					fp.epoch = p.lastEpoch
				} else {
					keptEnd = p.fetchAt < 0 && fp.offset == p.cp.EndOffset()
				}
			}
			p.mu.Unlock()
			if keptEnd {
				fp.epoch = p.keptEpoch(fp.offset)
			}
			out = append(out, fp)
			continue
		}
		p.mu.Unlock()
	}
	return out, behind
}

// keptEpoch returns the leader epoch of the batch of a copy kept from an
// earlier mount that ends at end, its last, or -1 when it cannot tell, and
// notes it for the first fetch (read once: an open's check, checkKeptCopy,
// and that fetch both want it). A fetch applied meanwhile noted a newer one.
func (p *part) keptEpoch(end record.Offset) int32 {
	h, ok, err := p.cp.LastBatch()
	if err != nil || !ok || h.NextOffset() != end {
		return -1 // no check: a bad copy is found by its reads
	}
	p.mu.Lock()
	if p.fetchAt < 0 && p.lastEnd < 0 {
		// Not if a fetch was applied meanwhile (another fetcher, the
		// leader having moved): what it noted is newer.
		p.lastEpoch, p.lastEnd = h.PartitionLeaderEpoch, end
	}
	p.mu.Unlock()
	return h.PartitionLeaderEpoch
}

func (f *fetcher) run() {
	defer close(f.done)
	c := f.c
	backoff := c.s.retryBackoff
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		pos, behind := f.parts()
		if len(pos) == 0 {
			select {
			case <-c.stop:
				return
			case <-f.wake:
			case <-time.After(time.Second):
			}
			continue
		}
		req := f.request(pos, behind)
		sent := time.Now()
		for i := range pos {
			pos[i].sent = sent
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.s.requestTimeout+c.s.fetchMaxWait)
		resp, err := req.RequestWith(ctx, c.cl.Broker(int(f.broker)))
		cancel()
		if err != nil {
			select {
			case <-c.stop:
				return
			default:
			}
			for _, fp := range pos {
				fp.p.fetchFailed(clientError(fmt.Sprintf("fetch from broker %d", f.broker), err))
			}
			go f.c.refreshSoon()
			select {
			case <-c.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = c.s.retryBackoff
		f.apply(pos, resp)
		c.evictSoon()
	}
}

// refreshSoon refreshes metadata after a fetch or produce found a leader
// gone, then wakes the fetchers.
func (c *Cluster) refreshSoon() {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.requestTimeout) // Close ends it
	defer cancel()
	if err := c.refresh(ctx); err != nil && c.ctx.Err() == nil {
		c.logOnce("metadata", "kafka: metadata refresh failed", "err", err)
	}
	c.wakeAll()
}

func (f *fetcher) request(pos []fetchPos, behind bool) *kmsg.FetchRequest {
	c := f.c
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MinBytes = 1
	req.MaxBytes = c.s.fetchMaxBytes
	req.IsolationLevel = int8(c.s.isolation)
	req.SessionEpoch = -1 // no fetch session: every request says everything
	if !behind {
		req.MaxWaitMillis = int32(c.s.fetchMaxWait.Milliseconds())
	}
	byTopic := map[string]int{}
	for _, fp := range pos {
		p := fp.p
		i, ok := byTopic[p.topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			p.mu.Lock()
			t.Topic, t.TopicID = p.topic, p.topicID
			p.mu.Unlock()
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[p.topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.id
		rp.FetchOffset = int64(fp.offset)
		rp.PartitionMaxBytes = c.s.partitionMax
		rp.LastFetchedEpoch = fp.epoch
		p.mu.Lock()
		rp.CurrentLeaderEpoch = p.epoch
		p.mu.Unlock()
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// apply hands each partition of the response to its part.
func (f *fetcher) apply(pos []fetchPos, resp *kmsg.FetchResponse) {
	if err := brokerError("fetch", resp.ErrorCode, nil); err != nil {
		for _, fp := range pos {
			fp.p.fetchFailed(err)
		}
		return
	}
	type key struct {
		name string
		id   [16]byte
		part int32
	}
	byName := map[key]*kmsg.FetchResponseTopicPartition{}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			rp := &t.Partitions[pi]
			byName[key{t.Topic, t.TopicID, rp.Partition}] = rp
		}
	}
	for _, fp := range pos {
		fp.p.mu.Lock()
		id := fp.p.topicID
		fp.p.mu.Unlock()
		rp := byName[key{fp.p.topic, id, fp.p.id}]
		if rp == nil {
			rp = byName[key{"", id, fp.p.id}]
		}
		if rp == nil {
			rp = byName[key{fp.p.topic, [16]byte{}, fp.p.id}]
		}
		if rp == nil {
			continue // not answered this time (MaxBytes reached)
		}
		fp.p.applyFetch(fp, rp)
	}
}

// fetchFailed records why the last fetch failed, for waiters that time out.
func (p *part) fetchFailed(err error) {
	p.mu.Lock()
	p.fetchErr = err
	p.mu.Unlock()
	p.changed()
}

// applyFetch writes what one partition of a fetch response brought into
// the copy.
func (p *part) applyFetch(fp fetchPos, rp *kmsg.FetchResponseTopicPartition) {
	c := p.c
	p.fetchMu.Lock()
	defer p.fetchMu.Unlock()
	defer p.changed()
	p.mu.Lock()
	current := p.gen == fp.gen
	p.mu.Unlock()
	if !current {
		return // a reset was decided since the request was sent
	}
	if fp.prep {
		p.applyPrepend(fp, rp)
		return
	}
	err := brokerError("fetch "+p.String(), rp.ErrorCode, nil)
	switch {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		p.outOfRange(fp)
		return
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.UnknownLeaderEpoch),
		errors.Is(err, kerr.LeaderNotAvailable), errors.Is(err, kerr.ReplicaNotAvailable), errors.Is(err, kerr.KafkaStorageError),
		errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.InconsistentTopicID),
		errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.OffsetNotAvailable):
		p.fetchFailed(err)
		go c.refreshSoon()
		return
	case errors.Is(err, syscall.EPERM):
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		return
	default:
		p.fetchFailed(err)
		c.logOnce("fetch "+p.String(), "kafka: fetch failed", "partition", p.String(), "err", err)
		return
	}
	if d := rp.DivergingEpoch; !fp.reset && (d.Epoch >= 0 || d.EndOffset >= 0) {
		p.diverged(fp, rp)
		return
	}
	batches, next, nextEpoch, err := p.split(rp, fp.offset)
	if err != nil {
		p.mu.Lock()
		p.err = fmt.Errorf("%s: %w", p, err)
		p.mu.Unlock()
		c.logger.Error("kafka: cannot copy the partition", "partition", p.String(), "err", err)
		return
	}
	logStart := record.Offset(rp.LogStartOffset)
	if fp.reset {
		p.mu.Lock()
		prep := p.prep
		p.prep = nil
		p.mu.Unlock()
		if prep != nil {
			prep.Abort() // the copy starts again: what was prepended goes
		}
		start := fp.offset
		if logStart > start {
			start = logStart
		}
		err = p.cp.ResetFetched(start, batches)
	} else {
		err = p.cp.AppendFetched(batches)
	}
	if err == nil && logStart > p.cp.StartOffset() {
		if logStart <= p.cp.EndOffset() {
			_, err = p.cp.AdvanceStart(logStart)
		} else {
			p.mu.Lock()
			at := logStart
			p.resetAt, p.gen = &at, p.gen+1
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.fetchErr = err
		if errors.Is(err, storage.ErrNotFollowing) {
			at := fp.offset
			p.resetAt, p.gen = &at, p.gen+1
		}
		c.logOnce("copy "+p.String(), "kafka: cannot write the copy", "partition", p.String(), "err", err)
		return
	}
	if fp.reset && p.gen == fp.gen {
		p.resetAt = nil
	}
	p.fetchAt = max(next, p.cp.EndOffset())
	if fp.reset && len(batches) == 0 {
		p.fetchAt = max(p.fetchAt, p.cp.StartOffset())
	}
	switch {
	case next >= 0 && next == p.fetchAt:
		p.lastEpoch, p.lastEnd = nextEpoch, next
	case fp.reset:
		p.lastEnd = -1
	}
	p.fetchErr = nil
	p.hw, p.lso, p.start, p.knownAt = record.Offset(rp.HighWatermark), record.Offset(rp.LastStableOffset), logStart, fp.sent
	if p.lso < 0 {
		p.lso = p.hw
	}
}

// diverged handles a fetch answered with a diverging epoch: the batch the
// copy ends with (named by its leader epoch) is not where the cluster's
// log has it, which is what an unclean leader election leaves behind: the
// cluster's log was cut below the copy's end and may have grown past it
// since, under the same offsets, with other records. Where a Kafka
// follower would truncate to the end offset the leader gives, the copy
// starts again from there, or from its own start when that is lower, as
// after a cut end (outOfRange).
func (p *part) diverged(fp fetchPos, rp *kmsg.FetchResponseTopicPartition) {
	end := max(record.Offset(rp.DivergingEpoch.EndOffset), 0)
	at := p.restartAt(record.Offset(rp.LogStartOffset), end)
	p.mu.Lock()
	p.resetAt, p.gen = &at, p.gen+1
	p.lastEnd = -1
	p.mu.Unlock()
	p.c.logger.Warn("kafka: the cluster's log lost the end of the copy (a diverging leader epoch); fetching the copy again",
		"partition", p.String(), "copy_end", fp.offset, "epoch", fp.epoch,
		"cluster_epoch", rp.DivergingEpoch.Epoch, "cluster_epoch_end", rp.DivergingEpoch.EndOffset)
}

// outOfRange handles OFFSET_OUT_OF_RANGE: the cluster deleted what the
// copy would fetch next (retention, DeleteRecords) or no longer has it
// (a truncation). The copy starts again where the cluster's log is.
func (p *part) outOfRange(fp fetchPos) {
	c := p.c
	ctx, cancel := context.WithTimeout(c.ctx, c.offsetsTimeout()) // Close ends it
	defer cancel()
	sent := time.Now()
	start, end, err := c.listOffsets(ctx, p)
	if err != nil {
		p.fetchFailed(err)
		return
	}
	at := start
	if fp.offset > end {
		at = p.restartAt(start, end)
		c.logger.Warn("kafka: the cluster's log ends before the copy; fetching the copy again", "partition", p.String(), "copy_end", fp.offset, "cluster_end", end)
	}
	p.mu.Lock()
	p.resetAt, p.gen = &at, p.gen+1
	// Both ends at once: a lookup answered from a new start and the old
	// end would find nothing between them (earliest ENOENT).
	p.setKnownLocked(start, end, sent)
	p.mu.Unlock()
}

// split cuts a partition's record batches into whole batches, drops a
// partial one at the end (brokers may send one), and, in a read_committed
// copy, leaves out the batches of aborted transactions as a Kafka consumer
// does, from the response's aborted transactions and the ABORT markers.
// It returns the batches to store, and the offset after the last batch
// looked at (-1 when none) and that batch's leader epoch.
func (p *part) split(rp *kmsg.FetchResponseTopicPartition, from record.Offset) (out [][]byte, next record.Offset, epoch int32, err error) {
	b := rp.RecordBatches
	next, epoch = -1, -1
	aborted := append([]kmsg.FetchResponseTopicPartitionAbortedTransaction(nil), rp.AbortedTransactions...)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	abortedBy := map[int64]bool{}
	readCommitted := p.c.s.isolation == ReadCommitted
	for len(b) >= record.LogOverhead+5 {
		size := int64(binary.BigEndian.Uint32(b[8:12])) + record.LogOverhead
		if magic := int8(b[16]); magic != record.Magic {
			return nil, 0, 0, fmt.Errorf("a batch of message format %d (magic %d): only RecordBatch v2 (Kafka 0.11 on) can be copied", magic, magic)
		}
		if size > int64(len(b)) {
			break // a partial batch ends the response
		}
		raw := b[:size]
		b = b[size:]
		h, err := record.ParseHeader(raw, 0)
		if err != nil {
			return nil, 0, 0, err
		}
		if h.LastOffset() < from {
			continue // before the offset asked for (a compressed v1 set would do this)
		}
		next, epoch = h.NextOffset(), h.PartitionLeaderEpoch
		if readCommitted && h.ProducerID >= 0 {
			for len(aborted) > 0 && record.Offset(aborted[0].FirstOffset) <= h.LastOffset() {
				abortedBy[aborted[0].ProducerID] = true
				aborted = aborted[1:]
			}
			if h.Attributes.Control() {
				if isAbortMarker(raw) {
					delete(abortedBy, h.ProducerID)
				}
			} else if h.Attributes.Transactional() && abortedBy[h.ProducerID] {
				continue // aborted: a read_committed consumer never sees it
			}
		}
		out = append(out, raw)
	}
	return out, next, epoch, nil
}

// isAbortMarker reports whether a control batch is an ABORT marker: its
// one record's key is version int16, type int16 (0 ABORT, 1 COMMIT).
func isAbortMarker(raw []byte) bool {
	batch, err := record.ParseBatch(raw, 0)
	if err != nil {
		return false
	}
	var dec record.Decoder
	it, err := dec.Records(&batch)
	if err != nil || !it.Next() {
		return false
	}
	k := it.Record().Key
	return len(k) >= 4 && binary.BigEndian.Uint16(k[2:4]) == 0
}

// applyPrepend writes what a fetch for the copy's growing backwards
// brought, and commits the prepend once it reaches the copy's start. Any
// failure falls back to starting the copy again where the reader wants.
func (p *part) applyPrepend(fp fetchPos, rp *kmsg.FetchResponseTopicPartition) {
	c := p.c
	p.mu.Lock()
	want, prep, prepStart := p.prepFrom, p.prep, p.prepStart
	if prep != nil && fp.offset != p.prepAt {
		p.mu.Unlock()
		return // an answer to an older question
	}
	p.mu.Unlock()
	fail := func(err error) {
		if prep != nil {
			prep.Abort()
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.prep = nil
		if p.prepFrom != nil {
			at := *p.prepFrom
			p.resetAt, p.gen, p.prepFrom = &at, p.gen+1, nil
		}
		if err != nil {
			c.logOnce("prepend "+p.String(), "kafka: cannot grow the copy backwards; starting it again", "partition", p.String(), "err", err)
		}
	}
	if want == nil {
		if prep != nil {
			prep.Abort()
			p.mu.Lock()
			p.prep = nil
			p.mu.Unlock()
		}
		return
	}
	if err := brokerError("fetch "+p.String(), rp.ErrorCode, nil); err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			fail(err)
			return
		}
		p.fetchFailed(err)
		go c.refreshSoon()
		return
	}
	if prep == nil {
		if fp.offset != *want {
			return
		}
		var err error
		if prep, err = p.cp.BeginPrepend(*want); err != nil {
			fail(err)
			return
		}
		p.mu.Lock()
		p.prep, p.prepAt, p.prepStart = prep, *want, *want
		p.mu.Unlock()
	} else if *want < prepStart {
		// A reader wants it earlier still: begin again from there.
		fail(nil)
		return
	}
	batches, next, _, err := p.split(rp, fp.offset)
	if err != nil {
		fail(err)
		return
	}
	limit := prep.Limit()
	done := len(rp.RecordBatches) == 0 || next >= limit
	keep := batches[:0]
	for _, b := range batches {
		h, err := record.ParseHeader(b, 0)
		if err != nil {
			fail(err)
			return
		}
		if h.BaseOffset >= limit {
			done = true
			break
		}
		keep = append(keep, b)
	}
	if err := prep.Append(keep); err != nil {
		fail(err)
		return
	}
	if !done {
		p.mu.Lock()
		p.prepAt = next
		p.mu.Unlock()
		return
	}
	if err := prep.Commit(); err != nil {
		fail(err)
		return
	}
	p.mu.Lock()
	p.prep = nil
	if p.prepFrom != nil && *p.prepFrom >= p.cp.StartOffset() {
		p.prepFrom = nil
	}
	p.mu.Unlock()
}
