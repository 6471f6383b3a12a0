// Package bench runs logfs's standard workloads and, in the same run, the
// baselines that do the least the same job can cost, and reports each
// workload's speed as a ratio to its baseline. It is what `logfs bench`
// prints; the command is only its flags:
//
//	rep, err := bench.Run(ctx, opts, os.Stderr) // progress lines on stderr
//	rep.WriteTable(os.Stdout)                   // or rep.WriteJSON
//	err = rep.Err()                             // ErrWrongAnswer if a value read back was wrong
//
// Speed is only claimed as a ratio against a baseline measured in the same
// run, on the same disk, with the same values: absolute figures move with
// the machine and its load, ratios much less. The peers (liftbridge,
// tidwall/wal, rosedb/wal) are measured by the harness in bench/peers, a
// module of its own so that their dependencies stay out of logfs's.
//
// # Workloads
//
// Through the storage API, for every record size (values only, no keys),
// on subject logfs against subject raw:
//
//	phase         logfs                                         raw (the baseline)
//	append        Partition.Append of Batch records, no fsync   one write(2) per batch
//	append+fsync  the same, Partition.Sync after every call     write(2) + fsync, for FsyncTime
//	lookup        Reader.Seek + Next at random offsets          one pread(2) at a position kept in memory
//	lookup-time   Partition.OffsetForTime of random times       (raw lookup by offset: raw has no time index)
//	read          Reader.Next from offset 0 to the end          1 MiB read(2)s
//	mixed         one appender, Readers followers in            (raw append of the same batch, no readers)
//	              Reader.Wait; lag = append start to follower
//
// Raw writes the same values, each behind an 8-byte little-endian length,
// to one file; it has no index and no batch format. It is the physical
// floor, not a competitor: a ratio of 0.7 means logfs spends 30% more time
// per record than the disk and the kernel do.
//
// Through a mount (Options.Exe's mount subcommand, a child process) of the
// logfs data set of every size, on subject mount against subject plain:
//
//	phase         mount                                   plain (the baseline)
//	cat           cat offset/0 > /dev/null                cat of the partition's .log files
//	tail          tail -n 10 offset/0                     tail -n 10 of a file of the same text
//	head          head -n 1 offset/N, random N            head -n 1 of that file (no lookup)
//	cat>>append   cat FILE >> TOPIC/0/append              cat FILE >> a plain file (and >> the
//	                                                      go-fuse floor's sink)
//	readers       each reader on offset/0, first and      the same reader on a plain file of the
//	              second read (see below)                 same text (warm)
//	pread         4 KiB pread(2) at random positions of   the same preads of that file, and of
//	              offset/0: new ones, then the same again the go-fuse floor's file (cache dropped)
//	open          open offset/N, read a line (4 KiB       open that file, seek to record N, read
//	              bufio), close; random N                 a line, close
//	concurrent    dd bs=1M of offset/(k*n/4), a quarter   the same byte ranges of that file, and
//	              of the records each: one alone, four    of the floor's file (first read: one
//	              at once (first, second read)            alone, four at once; second read)
//	write         write(2) of one line at a time to a     the same writes to the floor: a go-fuse
//	              new topic's append file                 server that does nothing (floorfs), and
//	                                                      to a plain file
//
// The readers are dd bs=4k, 64k and 1M, cat (st_blksize, 1 MiB), wc -l
// (16 KiB reads), mawk (4 KiB), Go's bufio.Scanner (4 KiB, in this
// process), Python's `for line in f` (8 KiB) and `f.read(1 MiB)` (into an
// unaligned buffer, which arrives as two requests), and grep -c (96 KiB);
// those missing from the machine are skipped and named in the progress
// lines. A first read runs with the kernel's cache of the mount's file
// dropped (FADV_DONTNEED), a second read right after it; both are
// compared with the same reader on the plain file, which is always warm.
// Each reader also runs on the floor's file (package floorfs: a go-fuse file
// of the plain file's bytes answered from memory, through the page cache as
// logfs serves record files), first and second read: what FUSE itself
// allows. Its lines are the plain file's, so that a reader that works per
// line does the same work on all three (until stop 29 the floor served a
// line every 1,024 bytes, and line readers ran up to 1.9x faster on it than
// on the plain file of 100-byte records).
// concurrent's four first reads are compared with one reader's first read
// (the aggregate should use both CPUs), its second reads with four on the
// plain file; the mount's write rows with the floor's. The mount's RSS
// before and after the readers phase is reported: it must not grow with
// what the mount served.
//
// memory mounts a data directory of its own, Options.Segments segments of
// one batch each in 10 partitions, and records the mount process's VmRSS,
// VmHWM and memory mappings after mounting, after ls -R and after a few
// reads (head, tail, cat in four partitions), and which segments have a
// mapped index although nothing read them (there should be none).
//
// # Values and checks
//
// A value is a function of its offset, so that anything read back is
// checked without keeping what was written:
//
//	value(off) = hex16(off) ++ pool[start(off) : start(off)+size-16]
//	             16 hex digits  letters and digits from a seeded 1 MiB pool
//
// Values hold no '\n': the mount's Values rendering (value, '\n') is one
// line per record, which is what the line tools see. Lookups check whole
// values; the timed sequential reads check the length, the leading offset
// and the last 8 bytes; tool output is compared, byte for byte, with the
// rendering of the records it should show. A difference is a wrong answer:
// counted in the report, shown as WRONG in the table, returned by
// Report.Err. It is not an error of Run, which measures on.
//
// # Fairness
//
// Both subjects of a phase get the same values, on the same file system,
// in the same run, raw first. The logfs topic has flush.ms=-1, so that
// nothing fsyncs but Sync, as for raw. Every append phase writes a fresh
// data set in a directory whose creation was synced; a data set is
// removed, and the removal synced, before the next phase, so that freeing
// its blocks is not paid inside a measurement. Before each read phase
// every file of the data set is fsynced and read once: reads run warm,
// from the page cache, with no writeback pending. Every timed loop starts
// after a garbage collection, and times only the calls measured, not the
// making of values or their checks (the sequential reads check inside the
// loop, cheaply; mixed times the appender's whole run, values included,
// against raw appends that exclude them). The read phases use the data set appended with the last
// batch size. Through the mount, the FUSE page cache of offset/0 is
// dropped before each cat and tail run, so that logfs, not the kernel's
// copy, answers; cat and cat>>append are the median of max(Count, 3) runs,
// and cat>>append includes the close, where the mount appends a partial
// last line. Every cell runs Options.Count times and the report keeps the
// run of median time per operation. The table's header gives the load
// average at the start and the end: a busy machine moves both subjects,
// but not always equally.
//
// # Reading the table
//
// One table per record size, rows grouped by phase and batch, logfs (or
// mount) above its baseline:
//
//	ops      timed operations: records, calls, lookups or tool runs
//	time/op  per record (append, read, mixed), per lookup, or per tool run
//	MB/s     value bytes per second (tools: bytes of output or input; 1 MB = 1e6 B)
//	rec/s    records per second
//	p50 p99  latency of one call, lookup or run (nearest rank)
//	x base   the baseline's time per record (per operation when no records
//	         move) divided by this row's: above 1 this row is faster
//	checked  values, lookups or tool outputs checked against what was written
//	measured the call or command timed
//	note     disk bytes per value byte of a data set; for mixed the
//	         followers' MB/s and lag; WRONG and the first wrong answer
//
// Then the memory phase, step by step, and the project's targets this
// package measures (those against liftbridge are bench/peers'), each met
// or MISSED with the figure behind it. WriteJSON writes the same report
// with every field, including the extremes of the Count runs.
//
// # Files
//
// A run works in a fresh directory under Options.Dir, which Run removes
// before it returns, also on error and when its context is cancelled:
//
//	logfs-bench-NNN/
//	  raw-SIZE-BATCH/raw.log          the raw data set
//	  logfs-SIZE-BATCH/bench-0/…      the logfs data set: topic bench, one partition
//	  raw-/logfs-SIZE-BATCH-fsync/    the append+fsync data sets
//	  mixed-SIZE-BATCH/               the mixed phase's data set
//	  mount-SIZE/mnt, plain.txt, …    the mount of logfs-SIZE-BATCH and the plain files
//	  memory/data, memory/mnt         the memory phase
//
// Mounts are stopped with SIGTERM (unmounted lazily and killed if that
// does not work in 20 s) and get SIGTERM when this process dies. Nothing
// is ever removed through a live mount: a directory with a mount under it
// is left in place and reported with ErrStillMounted.
//
// # Shared with bench/peers
//
// The peers harness measures the same workloads the same way, and takes
// from here what does the same job there, so that the two cannot drift
// apart: DefaultOptions (its defaults), TimeBatches, TimeLookups and
// TimeMixed (the timed loops of the append, lookup and mixed phases; the
// append and lookup calls are timed by the caller's function, around the
// call only), Percentiles, MedianRuns and SumWrong (latencies and the fold
// of repeated runs), ProbeMachine (the machine in the header), Settle and
// RemoveSynced (a data set before a phase and after a cell), and
// DurationCell, NanosCell and CountCell (the table's time and count cells).
// The values, the subjects and the report are each harness's own.
//
// # Concurrency
//
// Run is synchronous; only the mixed phase runs goroutines of its own
// (TimeMixed's followers). Runs may proceed concurrently, in different
// directories, but they then measure each other. A Report is plain data.
package bench
