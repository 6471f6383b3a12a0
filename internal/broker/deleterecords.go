package broker

import "github.com/logfs/logfs/record"

// DeleteRecords raises the log start offset to off, as Kafka's
// DeleteRecords (UnifiedLog.maybeIncrementLogStartOffset, 3.7.1): the
// log-start-offset-checkpoint says so at once; the segments wholly below
// off stay until retention deletes them (DeleteOldest). off may lie inside
// a segment, even inside a batch. A lower off changes nothing.
func (p *Partition) DeleteRecords(off record.Offset) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if off <= p.start {
		return nil
	}
	p.start = min(off, p.next)
	return p.writeCheckpoints()
}
