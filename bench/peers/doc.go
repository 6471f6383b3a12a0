// Package peers is the peer-comparison benchmark of logfs: it drives
// logfs's Go peers and a physical-floor baseline through the same workloads
// and reports each against the floor, and logfs against each peer once its
// adapter is registered.
//
// It is a nested module (bench/peers/go.mod) so that the peers' dependency
// graphs (liftbridge brings grpc, nats, raft, ...) never enter logfs's own
// go.mod; logfs itself comes in through `replace github.com/logfs/logfs => ../..`.
//
// # Logs
//
// Each adapter is one file, adapter_<name>.go, registering a Factory:
//
//	raw         write(2)/pread(2) of length-prefixed values in one file: the
//	            physical floor, NOT an indexed log (positions kept in memory)
//	liftbridge  github.com/liftbridge-io/liftbridge v1.9.0 server/commitlog
//	tidwall     github.com/tidwall/wal v1.2.1 (NoSync, NoCopy)
//	rosedb      github.com/rosedblabs/wal v1.3.8 (positions kept in memory)
//	logfs       package storage: one topic of one partition, one RecordBatch
//	            per Append, a Seek'd Reader for lookups, Reader.Wait to follow
//
// The harness numbers records from offset 0 for every log; an adapter maps
// that to the peer's numbering (tidwall's 1-based indexes, rosedb's chunk
// positions).
//
// # Workloads (per record size; batch = records per Append call)
//
//	append        n records, no fsync; latency per Append call
//	append+fsync  Sync after every batch, until -fsync-time or n records
//	reopen        Close, open the same directory again (recovery cost)
//	lookup        random offsets (same sequence for all logs) -> value,
//	              checked byte for byte outside the timed call
//	lookup-time   random timestamps -> first offset at or after; n/a unless
//	              the log has a time lookup (logfs, liftbridge)
//	read          sequential read of all n records, each value checked
//	              (length, leading offset, last 8 bytes) inside the loop
//	mixed         one appender, -readers followers from offset 0; n/a unless
//	              the log implements Follower (logfs, liftbridge)
//
// # Fairness
//
// Same n, record size, segment size and values for every log; no fsync
// except in append+fsync; timestamps are ours and strictly increasing
// (ts(off) = TimeBase + off*TimeStep). Every phase starts from
// bench.Settle(dir): all files of the data set fsynced and read once, so
// every read phase runs with the data set entirely in the page cache and no
// writeback pending, identically for every log; runtime.GC() runs before
// every phase. Data sets are removed (and the removal committed) between
// cells.
//
// # What comes from package bench
//
// The pieces that do the same job in logfs bench are logfs bench's, from
// package bench (github.com/logfs/logfs/bench, through the replace above):
// the default options (bench.DefaultOptions), the timed loops of the append,
// lookup and mixed phases (bench.TimeBatches, TimeLookups, TimeMixed),
// percentiles and the fold of repeated runs (Percentiles, MedianRuns,
// SumWrong), the machine probe (ProbeMachine), settling and removing a data
// set (Settle, RemoveSynced) and the time and count cells of the table
// (DurationCell, NanosCell, CountCell). What stays here differs in
// substance: the values (binary, 16 bytes at least; logfs bench's are text
// lines for the mount's line tools), the Log interface and its adapters,
// the report, its JSON names and its tables.
//
// # Correctness
//
// Values are derived from their offset (see payload), so every value read
// back is checked. Wrong answers are counted (Result.Wrong), printed in the
// table and listed at the end; a log that loses or reorders records, or
// fails an operation, stops the run.
package peers
