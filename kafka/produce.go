package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// producer is an idempotent producer (KIP-98) that sends one batch per
// request, built by logfs's own record.Builder, so that what one write(2)
// to the append file asks for is exactly one batch: acknowledged whole or
// not at all. franz-go's kgo producer cuts batches itself and may split a
// write into several, which is why the produce path is built on kmsg.
//
// Sequence numbers are per partition; one append per partition is in
// flight at a time (part.prodMu), so they follow offsets.
type producer struct {
	c *Cluster

	mu    sync.Mutex
	id    int64 // -1 until InitProducerID
	epoch int16
	seqs  map[tpKey]int32
}

func newProducer(c *Cluster) *producer {
	return &producer{c: c, id: -1, seqs: map[tpKey]int32{}}
}

// init gets a producer id, once, or again after reset.
func (pr *producer) init(ctx context.Context) (int64, int16, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.id >= 0 {
		return pr.id, pr.epoch, nil
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, pr.c.cl)
	if err != nil {
		return 0, 0, pr.c.ctxError(ctx, "init producer id", err)
	}
	if err := brokerError("init producer id", resp.ErrorCode, nil); err != nil {
		return 0, 0, err
	}
	pr.id, pr.epoch = resp.ProducerID, resp.ProducerEpoch
	clear(pr.seqs)
	return pr.id, pr.epoch, nil
}

// reset forgets the producer id: after an append whose outcome is not
// known, the sequence numbers can no longer be trusted.
func (pr *producer) reset(id int64) {
	pr.mu.Lock()
	if pr.id == id {
		pr.id = -1
	}
	pr.mu.Unlock()
}

func (pr *producer) seq(k tpKey) int32 {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.seqs[k]
}

func (pr *producer) advance(id int64, k tpKey, n int32) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.id == id {
		s := int64(pr.seqs[k]) + int64(n)
		if s > 1<<31-1 {
			s -= 1 << 31 // Kafka's sequence numbers wrap to 0
		}
		pr.seqs[k] = int32(s)
	}
}

// Produce appends the first records of recs that fit one batch of the
// topic's max.message.bytes, as one batch, and returns how many it took
// once every in-sync replica has them (acks=all). The batch is
// uncompressed unless compression.type says otherwise; timestamps of 0 get
// the wall clock. A first record that alone does not fit fails with
// ErrRecordTooLarge (EFBIG), and so does MESSAGE_TOO_LARGE from the broker:
// nothing of the batch is appended then. Retriable errors (a leader that
// moved, a broker restarting) are retried with the same sequence numbers,
// so a retry never duplicates; an append not acknowledged within
// delivery.timeout.ms fails with ErrTimeout (ETIMEDOUT) and is not tried
// again. A record file opened after Produce returned shows the records.
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
	p.prodMu.Lock()
	defer p.prodMu.Unlock()
	limit := cp.Topic().Config().MaxMessageBytes
	nowMs := time.Now().UnixMilli()
	var b record.Builder
	b.Reset()
	n := 0
	for n < len(recs) {
		r := &recs[n]
		ts := r.Timestamp
		if ts == 0 {
			ts = nowMs
		}
		if int64(b.Size()+record.RecordSize(0, int32(n), r.Key, r.Value, r.Headers)+16) > limit {
			break
		}
		b.Append(ts, r.Key, r.Value, r.Headers)
		n++
	}
	if n == 0 {
		r := &recs[0]
		return 0, -1, fmt.Errorf("%w: a record of %d bytes, over max.message.bytes (%d) of %s", storage.ErrRecordTooLarge,
			record.HeaderSize+record.RecordSize(0, 0, r.Key, r.Value, r.Headers), limit, p.topic)
	}
	deadline := time.Now().Add(c.s.deliveryTimeout)
	dctx, cancel := context.WithDeadlineCause(ctx, deadline, ErrTimeout)
	defer cancel()
	base, err := c.produceBatch(dctx, p, &b, n)
	if err != nil {
		return 0, -1, err
	}
	// The next lookup asks the cluster again, so a file opened now ends
	// past these records.
	p.mu.Lock()
	p.producedAt = time.Now()
	p.mu.Unlock()
	return n, base, nil
}

// produceBatch sends the batch in b until it is acknowledged, refused, or
// ctx's deadline passes.
func (c *Cluster) produceBatch(ctx context.Context, p *part, b *record.Builder, n int) (record.Offset, error) {
	k := tpKey{p.topic, p.id}
	backoff := c.s.retryBackoff
	sent := false // a request went out: its outcome may be unknown
	op := "append to " + p.String()
	var lastErr error
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			break
		}
		id, epoch, err := c.prod.init(ctx)
		if err != nil {
			lastErr = err
			if !retriable(err) {
				return -1, err
			}
			if !sleepCtx(ctx, backoff) {
				break
			}
			continue
		}
		raw, err := b.BuildWith(record.BuildOptions{Compression: c.s.compression, ProducerID: id, ProducerEpoch: epoch, BaseSequence: c.prod.seq(k)})
		if err != nil {
			return -1, err
		}
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
		rctx, rcancel := context.WithTimeout(ctx, c.s.requestTimeout)
		resp, err := req.RequestWith(rctx, c.cl.Broker(int(leader)))
		rcancel()
		sent = true
		if err == nil {
			err = produceError(op, resp)
		}
		switch {
		case err == nil:
			c.prod.advance(id, k, int32(n))
			return baseOffset(resp), nil
		case errors.Is(err, kerr.DuplicateSequenceNumber):
			c.prod.advance(id, k, int32(n))
			return -1, nil
		case errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID), errors.Is(err, kerr.InvalidProducerEpoch):
			// The broker lost this producer's state (or never had it):
			// start a new producer id. Only safe while no request of this
			// batch may have been appended.
			c.prod.reset(id)
			if attempt > 0 {
				return -1, fmt.Errorf("%s: %w; not retried, as an earlier attempt may have been appended (%w)", op, err, syscall.EIO)
			}
			lastErr = err
			continue
		case retriable(err):
			lastErr = err
			go c.refreshSoon()
			if !sleepCtx(ctx, backoff) {
				break
			}
			backoff = min(2*backoff, time.Second)
			continue
		default:
			return -1, err
		}
	}
	if sent {
		// Its outcome is not known: a new producer id keeps later
		// appends' sequence numbers from depending on it.
		c.prod.mu.Lock()
		c.prod.id = -1
		c.prod.mu.Unlock()
	}
	if errors.Is(context.Cause(ctx), ErrTimeout) {
		if lastErr != nil {
			return -1, fmt.Errorf("%s: not acknowledged within delivery.timeout.ms (%v): %w; last error: %v", op, c.s.deliveryTimeout, ErrTimeout, lastErr)
		}
		return -1, fmt.Errorf("%s: not acknowledged within delivery.timeout.ms (%v): %w", op, c.s.deliveryTimeout, ErrTimeout)
	}
	return -1, ctx.Err()
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
