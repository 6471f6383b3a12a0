package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// part is the follower state of one partition of the cluster.
//
// The copy (cp) holds one contiguous range of the partition, from its log
// start to its log end offset; the follower fetches from fetchAt (at or
// past the copy's end: batches a read_committed copy leaves out are
// covered without being stored). A Hold says which offsets a reader needs
// and until which end; the fetcher of the partition's leader fetches while
// any part needs it. Only a fetcher changes the copy (under fetchMu).
type part struct {
	c     *Cluster
	topic string
	id    int32
	cp    *storage.Partition

	fetchMu sync.Mutex // serialises changes of the copy
	stream  *stream    // appends (produce.go)

	mu sync.Mutex
	// GUARDED_BY(mu)
	topicID [16]byte
	leader  int32
	epoch   int32
	stale   bool           // the copy is of an older topic of this name: reset on next use
	resetAt *record.Offset // start the copy again here at the next fetch
	// prepFrom asks for the copy to grow backwards to here; prep is the
	// prepend in progress, fetched from prepAt on (fetcher only).
	prepFrom  *record.Offset
	prep      *storage.Prepend
	prepAt    record.Offset
	prepStart record.Offset
	fetchAt   record.Offset // where the next fetch starts; -1 until the first
	// lastEpoch is the leader epoch of the batch that ends at lastEnd,
	// the last one fetched (or, before the first fetch, the kept copy's
	// last): a fetch from lastEnd names it (LastFetchedEpoch), and the
	// leader answers with a diverging epoch when its log no longer has
	// that batch there. lastEnd is -1 when unknown.
	lastEpoch int32
	lastEnd   record.Offset
	// endChecked says a copy kept from an earlier mount was checked
	// against the cluster's log end before its first fetch.
	endChecked bool
	gen        uint64        // bumped by every reset decision: fetches of an older one are dropped
	want       record.Offset // the copy must cover up to here
	evicting   record.Offset // the copy's start is being raised to here (0: no eviction under way)
	holds      map[*hold]struct{}
	lastUse    time.Time
	err        error // what waiters are told: the topic was deleted, authorization failed
	// What the cluster said last, and when (fetch responses, ListOffsets).
	start, hw, lso record.Offset
	knownAt        time.Time // when the request that said so was sent
	producedAt     time.Time // when an append through the mount was last acknowledged
	limitAsked     time.Time // when RefreshLimit last asked the cluster
	fetchErr       error     // the last fetch's failure, until one succeeds
	progress       chan struct{}
}

// hold is one reader's need of the copy.
type hold struct{ from record.Offset }

func newPart(c *Cluster, topic string, id int32, cp *storage.Partition) *part {
	p := &part{c: c, topic: topic, id: id, cp: cp, fetchAt: -1, lastEnd: -1, holds: map[*hold]struct{}{}, progress: make(chan struct{}),
		start: -1, hw: -1, lso: -1}
	p.stream = newStream(c, p)
	return p
}

func (p *part) String() string { return fmt.Sprintf("%s/%d", p.topic, p.id) }

// changed wakes everyone waiting on the partition's progress.
func (p *part) changed() {
	p.mu.Lock()
	close(p.progress)
	p.progress = make(chan struct{})
	p.mu.Unlock()
}

// coveredLocked is the offset up to which the copy has what the cluster
// has: the copy's end, or further when the last batches were left out.
func (p *part) coveredLocked() record.Offset {
	if p.resetAt != nil || p.stale {
		return -1
	}
	return max(p.cp.EndOffset(), p.fetchAt)
}

// floorLocked is the least offset an open file needs.
func (p *part) floorLocked() record.Offset {
	floor := record.Offset(math.MaxInt64)
	for h := range p.holds {
		floor = min(floor, h.from)
	}
	return floor
}

// activeLocked reports whether the partition should be fetched now.
func (p *part) activeLocked() bool {
	if p.err != nil || p.stale {
		return false // nothing to fetch until a reader says where
	}
	return len(p.holds) > 0 || p.resetAt != nil || p.prepFrom != nil || p.coveredLocked() < p.want || time.Since(p.lastUse) < idleFollow
}

// endLocked is the end a reader sees: the last stable offset under
// read_committed, the high watermark otherwise.
func (p *part) endLocked() record.Offset {
	if p.c.s.isolation == ReadCommitted {
		return p.lso
	}
	return p.hw
}

// partOf returns the follower state of a partition of the copy.
func (c *Cluster) partOf(ctx context.Context, cp *storage.Partition) (*part, error) {
	return c.part(ctx, cp.Topic().Name(), cp.ID())
}

// Copy returns the copy of a partition of the cluster, to read with
// storage views once Hold has returned.
func (c *Cluster) Copy(ctx context.Context, topic string, id int) (*storage.Partition, error) {
	p, err := c.part(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	return p.cp, nil
}

// offsetsTimeout bounds the ListOffsets of a lookup: past it, what the
// copy holds is served as it is (the cluster may be unreachable).
func (c *Cluster) offsetsTimeout() time.Duration { return min(c.s.requestTimeout, 3*time.Second) }

// Offsets returns the partition's log start and end offsets on the
// cluster (the end is the last stable offset under read_committed, the
// high watermark under read_uncommitted). A partition fetched within the
// last second answers from the fetch; when the cluster cannot be reached,
// the last offsets it gave (or the copy's own) are returned, so that what
// is local can still be read.
func (c *Cluster) Offsets(ctx context.Context, cp *storage.Partition) (start, end record.Offset, err error) {
	p, err := c.partOf(ctx, cp)
	if err != nil {
		return 0, 0, err
	}
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return 0, 0, err
	}
	if time.Since(p.knownAt) < time.Second && p.knownAt.After(p.producedAt) && p.fetchErr == nil && p.endLocked() >= p.start && p.start >= 0 {
		start, end = p.start, p.endLocked()
		p.mu.Unlock()
		return start, end, nil
	}
	p.mu.Unlock()
	lctx, cancel := context.WithTimeoutCause(ctx, c.offsetsTimeout(), ErrTimeout)
	defer cancel()
	sent := time.Now()
	start, end, err = c.listOffsets(lctx, p)
	if err == nil {
		p.mu.Lock()
		p.setKnownLocked(start, end, sent)
		p.mu.Unlock()
		return start, end, nil
	}
	if ctx.Err() != nil {
		return 0, 0, ctx.Err()
	}
	if errors.Is(err, storage.ErrNoTopic) || errors.Is(err, storage.ErrNoPartition) {
		return 0, 0, err
	}
	// Unreachable: serve what is known.
	p.mu.Lock()
	defer p.mu.Unlock()
	start, end = p.start, p.endLocked()
	if cs := cp.StartOffset(); start < 0 || start < cs {
		start = cs
	}
	if cov := p.coveredLocked(); end < 0 || cov >= 0 && end > cov {
		end = max(cov, start)
	}
	c.logOnce("offsets "+p.String(), "kafka: cannot list offsets; serving the copy as it is", "partition", p.String(), "err", err)
	return start, end, nil
}

// setKnownLocked records what ListOffsets said at sent: the log start and
// the end of the mount's isolation level.
func (p *part) setKnownLocked(start, end record.Offset, sent time.Time) {
	p.start, p.knownAt = start, sent
	if p.c.s.isolation == ReadCommitted {
		p.lso = end
	} else {
		p.hw = end
	}
}

// listOffsets asks the partition's leader for its log start and end.
func (c *Cluster) listOffsets(ctx context.Context, p *part) (start, end record.Offset, err error) {
	var wg sync.WaitGroup
	var errs [2]error
	var offs [2]record.Offset
	for i, ts := range []int64{-2, -1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offs[i], _, errs[i] = c.listOffset(ctx, p, ts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return 0, 0, err
	}
	return offs[0], offs[1], nil
}

// listOffset is one ListOffsets lookup: -2 earliest, -1 latest (the last
// stable offset under read_committed), or a timestamp in ms. found is
// false when no record is that recent.
func (c *Cluster) listOffset(ctx context.Context, p *part, ts int64) (off record.Offset, found bool, err error) {
	return c.listOffsetAs(ctx, p, ts, c.s.isolation)
}

// listOffsetAs is listOffset at the isolation level iso.
func (c *Cluster) listOffsetAs(ctx context.Context, p *part, ts int64, iso IsolationLevel) (off record.Offset, found bool, err error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = int8(iso)
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = p.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p.id, ts
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, c.cl)
	op := "list offsets of " + p.String()
	if err != nil {
		return 0, false, c.ctxError(ctx, op, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != p.topic || rp.Partition != p.id {
				continue
			}
			if err := brokerError(op, rp.ErrorCode, nil); err != nil {
				return 0, false, err
			}
			if rp.Offset < 0 {
				return 0, false, nil
			}
			return record.Offset(rp.Offset), true, nil
		}
	}
	return 0, false, fmt.Errorf("%s: no answer for the partition (%w)", op, ErrTimeout)
}

// OffsetForTime is Kafka's offsetsForTimes on the cluster: the offset of
// the first record stamped at or after ts (ms), or the end offset when no
// record is that recent, as locally.
func (c *Cluster) OffsetForTime(ctx context.Context, cp *storage.Partition, ts int64) (record.Offset, error) {
	p, err := c.partOf(ctx, cp)
	if err != nil {
		return 0, err
	}
	// ListOffsets gives negative timestamps a meaning of their own (-1
	// latest, -2 earliest, -3 the largest timestamp); a time before 1970
	// finds what 0 finds, as locally, where every stamp is at or after it.
	ts = max(ts, 0)
	lctx, cancel := c.apiContext(ctx)
	defer cancel()
	off, found, err := c.listOffset(lctx, p, ts)
	if err != nil {
		return 0, err
	}
	_, end, err := c.Offsets(ctx, cp)
	if err != nil {
		return 0, err
	}
	if !found || off > end {
		return end, nil
	}
	return off, nil
}

// Hold returns once the copy holds every record from `from` up to the end
// offset the cluster has now, and keeps the partition followed until
// release is called: a record file opened now has its exact size and
// grows as the copy follows. It waits at most default.api.timeout.ms
// (ErrTimeout), and no longer than ctx (an interrupted open).
func (c *Cluster) Hold(ctx context.Context, cp *storage.Partition, from record.Offset) (release func(), err error) {
	p, err := c.partOf(ctx, cp)
	if err != nil {
		return nil, err
	}
	start, end, err := c.Offsets(ctx, cp)
	if err != nil {
		return nil, err
	}
	if from < start || from > end {
		return nil, fmt.Errorf("%s offset %d (the cluster holds %d to %d): %w", p, from, start, end, storage.ErrOffsetOutOfRange)
	}
	c.checkKeptCopy(ctx, p, start, end)
	c.checkLiveCopy(ctx, p, start, end)
	h := &hold{from: from}
	p.mu.Lock()
	p.holds[h] = struct{}{}
	p.lastUse = time.Now()
	p.want = max(p.want, end)
	c.planLocked(p, from)
	p.mu.Unlock()
	release = func() {
		p.mu.Lock()
		delete(p.holds, h)
		p.lastUse = time.Now()
		p.mu.Unlock()
	}
	c.follow(p)
	if err := c.await(ctx, p, from, end); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// checkKeptCopy makes sure, before the first fetch since the mount, that a
// copy kept from an earlier mount holds no offset past the cluster's log
// end: the cluster lost those (a restore, an unclean leader election) and
// may have given their numbers to other records since. Such a copy starts
// again where the cluster's log is, as after OFFSET_OUT_OF_RANGE; before,
// its records were served until a fetch found out. start and end are what
// Offsets said, from a ListOffsets: no fetch has answered yet. A copy that
// ends where the cluster's log does is asked about by the leader epoch of
// its last batch (keptDiverged): a log cut and grown back to the copy's
// end has other records there, and only the epochs tell. (A copy that
// ends before is found out by the first fetch, which an open waits for.)
func (c *Cluster) checkKeptCopy(ctx context.Context, p *part, start, end record.Offset) {
	p.mu.Lock()
	skip := p.endChecked || p.fetchAt >= 0 || p.resetAt != nil
	p.mu.Unlock()
	if skip {
		return
	}
	ce := p.cp.EndOffset()
	logEnd := end
	if ce > end && c.s.isolation == ReadCommitted {
		// end is the last stable offset, which a copy may pass (records
		// of transactions still open): compare with the log end.
		lctx, cancel := context.WithTimeoutCause(ctx, c.offsetsTimeout(), ErrTimeout)
		off, _, err := c.listOffsetAs(lctx, p, -1, ReadUncommitted)
		cancel()
		if err != nil {
			return // unreachable: what is local is served, as Offsets does
		}
		logEnd = off
	}
	at, cut := p.restartAt(start, end), ce > logEnd
	if !cut && ce >= end && ce > p.cp.StartOffset() {
		// The copy holds all an open waits for, so no fetch (which names
		// the epoch) would come before its records are read.
		epochEnd, diverged, ok := c.keptDiverged(ctx, p, ce)
		if !ok {
			return // asked again by the next open, until a fetch answers
		}
		cut, at = diverged, p.restartAt(start, epochEnd)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endChecked = true
	if p.fetchAt >= 0 || p.resetAt != nil || p.cp.EndOffset() != ce || !cut {
		return
	}
	p.resetAt, p.gen = &at, p.gen+1
	c.logger.Warn("kafka: the cluster's log does not hold the end of the copy kept from the last mount; fetching the copy again",
		"partition", p.String(), "copy_end", ce, "cluster_end", logEnd)
}

// keptDiverged asks the leader where the leader epoch of the kept copy's
// last batch (which ends at ce) ends in the cluster's log (epochEnd). ok
// is false when there is no answer to go by.
func (c *Cluster) keptDiverged(ctx context.Context, p *part, ce record.Offset) (epochEnd record.Offset, diverged, ok bool) {
	epoch := p.keptEpoch(ce) // noted for the first fetch too, which names it
	if epoch < 0 {
		return 0, false, false
	}
	return c.epochEnd(ctx, p, epoch, ce)
}

// epochEnd asks the leader where leader epoch `epoch`, that of the batch
// of the copy that ends at ce, ends in the cluster's log, as a Kafka
// consumer validates its position (OffsetForLeaderEpoch, KIP-320): the
// copy diverged when that epoch is not in the log (a lower one is named)
// or ends before ce. ok is false when there is no answer to go by: an
// unknown epoch, a broker too old, the cluster out of reach. The request
// names no current leader epoch: the metadata may not have caught up with
// the leader change that cut the log.
func (c *Cluster) epochEnd(ctx context.Context, p *part, epoch int32, ce record.Offset) (end record.Offset, diverged, ok bool) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = p.topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p.id, -1, epoch
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	lctx, cancel := context.WithTimeoutCause(ctx, c.offsetsTimeout(), ErrTimeout)
	defer cancel()
	resp, err := req.RequestWith(lctx, c.cl)
	if err != nil {
		return 0, false, false
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic != p.topic || rp.Partition != p.id || rp.ErrorCode != 0 || rp.LeaderEpoch < 0 || rp.EndOffset < 0 {
				continue
			}
			return record.Offset(rp.EndOffset), rp.LeaderEpoch < epoch || record.Offset(rp.EndOffset) < ce, true
		}
	}
	return 0, false, false
}

// checkLiveCopy makes sure that a copy fetched since the mount, which the
// cluster's log end (end, from the ListOffsets of an open) is now below,
// still has the cluster's records before an open is answered from it: a
// log cut by an unclean leader election (and maybe grown since with other
// records) is otherwise served until the next fetch reaches the new leader
// and is told of a diverging epoch. A log end below the copy's is also what
// a new leader's high watermark, not yet caught up, says: the epoch of the
// copy's last batch tells the two apart.
func (c *Cluster) checkLiveCopy(ctx context.Context, p *part, start, end record.Offset) {
	p.mu.Lock()
	gen, epoch, last := p.gen, p.lastEpoch, p.lastEnd
	check := p.resetAt == nil && p.fetchAt >= 0 && last >= 0 && epoch >= 0 && last == p.coveredLocked() && last > end
	p.mu.Unlock()
	if !check {
		return
	}
	epochEnd, diverged, ok := c.epochEnd(ctx, p, epoch, last)
	if !ok || !diverged {
		return
	}
	at := p.restartAt(start, epochEnd)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen || p.resetAt != nil || p.lastEnd != last {
		return // the copy changed since: the fetcher knows better
	}
	p.resetAt, p.gen, p.lastEnd = &at, p.gen+1, -1
	c.logger.Warn("kafka: the cluster's log lost the end of the copy (its leader epoch ends before it); fetching the copy again",
		"partition", p.String(), "copy_end", last, "epoch", epoch, "cluster_epoch_end", epochEnd)
}

// restartAt is where the copy starts again once the cluster's log no
// longer holds it from lost on: at the copy's own start, so that the
// readers it served are served again, or at lost when that is lower; never
// before the cluster's log start.
func (p *part) restartAt(logStart, lost record.Offset) record.Offset {
	return max(logStart, min(p.cp.StartOffset(), lost))
}

// planLocked decides where the copy must go for a reader from `from`:
// on from its end; grown backwards to from when it begins after from
// (so that readers further on go on undisturbed); or started again at
// from when it holds nothing of use (empty, of an older topic, or far
// before from with nobody reading it).
func (c *Cluster) planLocked(p *part, from record.Offset) {
	cs, ce := p.cp.StartOffset(), p.cp.EndOffset()
	empty := cs == ce
	if !p.stale {
		if p.resetAt != nil && *p.resetAt <= from {
			return // a reset already planned serves this reader too
		}
		if p.resetAt == nil && from < cs && !empty {
			if p.prepFrom == nil || from < *p.prepFrom {
				at := from
				p.prepFrom = &at
			}
			return
		}
	}
	cov := p.coveredLocked()
	startAgain := p.stale || // a copy of an older topic of this name
		p.resetAt != nil || // a reset planned after from
		p.fetchAt < 0 && empty || from < cs || // nothing copied yet, or nothing of use
		from > cov && (len(p.holds) <= 1 || empty) && c.gapTooBig(p, from-cov) // far after, and nobody reads it
	if !startAgain {
		return // follow on from the copy's end
	}
	at := from
	p.resetAt, p.stale = &at, false
	p.gen++
	p.prepFrom = nil // the fetcher aborts a prepend in progress
}

// gapTooBig reports whether fetching n offsets to join the copy to a read
// after its end would cost more than starting the copy there: more than
// 16 MiB by the copy's own bytes per offset.
func (c *Cluster) gapTooBig(p *part, n record.Offset) bool {
	cs, ce := p.cp.StartOffset(), p.cp.EndOffset()
	if ce <= cs {
		return true
	}
	perOffset := float64(p.cp.Size()) / float64(ce-cs)
	return float64(n)*perOffset > 16<<20
}

// await waits until the copy holds [from, end). It gives up with
// ErrTimeout once the copy has not come closer for default.api.timeout.ms
// (a copy that keeps growing is waited for, however long the partition),
// and with EFBIG when the copy would have to outgrow its byte budget for
// this file alone.
func (c *Cluster) await(ctx context.Context, p *part, from, end record.Offset) error {
	timeout := time.NewTimer(c.s.apiTimeout)
	defer timeout.Stop()
	var last progress
	for first := true; ; first = false {
		p.mu.Lock()
		ch, err, cov := p.progress, p.err, p.coveredLocked()
		fetchErr, start := p.fetchErr, p.start
		now := progress{cov: cov, copyStart: p.cp.StartOffset(), prepAt: p.prepAt, gen: p.gen}
		evicted := p.evicting > from || now.copyStart > from && p.resetAt == nil && p.prepFrom == nil && !p.stale
		if evicted && p.evicting == 0 {
			// Eviction raised the copy's start past from since Hold planned:
			// grow it back.
			c.planLocked(p, from)
		}
		p.mu.Unlock()
		if evicted {
			c.follow(p)
		}
		switch {
		case err != nil:
			return err
		case localFailure(fetchErr) && (cov < end || now.copyStart > from):
			// The copy cannot be written (a full disk) and lacks what the
			// reader needs: waiting for the cluster would not help.
			return fmt.Errorf("%s: the copy cannot grow: %w", p, fetchErr)
		case start > from:
			return fmt.Errorf("%s offset %d: %w on the cluster (it starts at %d now)", p, from, storage.ErrDeleted, start)
		}
		if first || now != last {
			last = now
			if p.bytesFrom(from) > c.opts.CopyBytes {
				return fmt.Errorf("%s offset %d: the file needs more than the copy's byte budget (%d bytes, --copy-bytes): %w",
					p, from, c.opts.CopyBytes, syscall.EFBIG)
			}
			if cov >= end && now.copyStart <= from && !evicted {
				return nil
			}
			if !timeout.Stop() {
				<-timeout.C
			}
			timeout.Reset(c.s.apiTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			if fetchErr != nil {
				return fmt.Errorf("%s: the copy came no closer to offset %d in %v: %w: %w", p, end, c.s.apiTimeout, ErrTimeout, fetchErr)
			}
			return fmt.Errorf("%s: the copy came no closer to offset %d in %v: %w", p, end, c.s.apiTimeout, ErrTimeout)
		case <-c.stop:
			return ErrClosed
		case <-ch:
		}
	}
}

// localFailure reports whether err, from writing the copy, is the local
// disk's: full, over quota, or read-only.
func localFailure(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}

// progress is where a copy stands, as a waiter for it sees: any change is
// the copy coming closer (or starting again).
type progress struct {
	cov, copyStart, prepAt record.Offset
	gen                    uint64
}

// bytesFrom is how many bytes the copy holds from the segment holding
// offset from on.
func (p *part) bytesFrom(from record.Offset) int64 {
	segs, err := p.cp.Segments()
	if err != nil {
		return 0
	}
	var n int64
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].BaseOffset <= from {
			continue
		}
		n += s.Bytes
	}
	return n
}
