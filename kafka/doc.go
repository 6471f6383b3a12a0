// Package kafka presents a Kafka cluster through a local copy of what was
// read from it, so that logfs mounts a cluster with the tree, renderings
// and habits of a local mount (logfs mount --bootstrap-server). It is the
// only package that speaks Kafka's protocol (franz-go: kgo for connections,
// TLS and SASL, kmsg for the requests); fs sees it through fs.Cluster,
// storage through its follower entry point (storage/fetched.go).
//
//	c, err := kafka.Open(ctx, kafka.Options{Brokers: []string{"host:9092"}, Properties: props})
//	srv, err := fs.Mount(mp, c.Log(), fs.Options{Cluster: c})
//	…
//	c.Close()
//
// # The copy
//
// The copy is a storage.Log in its own data directory (Options.Dir, by
// default $XDG_CACHE_HOME/logfs/cluster-<cluster id>): for each partition
// that was read, one contiguous range of its batches, byte for byte as the
// leader stores them (offsets, producer fields, CRCs), named and indexed as
// Kafka names and indexes them. Reads are served from it by the code that
// serves local data.
//
//	cluster partition:  [log start ............................ high watermark)
//	copy:                        [copy start ........ copy end)
//	a file offset/N:                  N ............................→ grows
//
// A record file of offset N is opened (fs calls Hold) once the copy holds
// [N, the end the cluster has at that moment): the open waits for that,
// interruptibly and at most default.api.timeout.ms, so that the file has
// its exact size at once and every pread is answered locally; then the
// partition is followed, and the file grows, until the last file of the
// partition closes (and idleFollow after, so that the next open finds the
// copy caught up). A read before the copy's start grows it backwards
// (storage's Prepend: new segments fetched, synced, then put in front in
// one step), so files open further on are not disturbed; a read far after
// its end with nobody reading it starts the copy again there (storage's
// ResetFetched), as does an empty copy; a read a little past its end fills
// the gap.
//
// Following is what a Kafka follower does: one fetcher per leader broker
// sends one FetchRequest at a time for every followed partition it leads
// (a broker answers one connection's requests in order, so a long poll per
// partition would hold up the others), long-polling fetch.max.wait.ms
// when nothing is behind. A moved leader (NOT_LEADER, a fenced epoch) means
// a metadata refresh and the new leader's fetcher; OFFSET_OUT_OF_RANGE
// means the cluster deleted what was next (the copy starts again at the
// cluster's log start; readers past the gap get storage.ErrDeleted) or
// truncated below it (the copy is fetched again). A fetch from the copy's
// end names the leader epoch of its last batch (LastFetchedEpoch, as a
// Kafka follower and consumer do), so that a leader whose log was cut there
// by an unclean election, and may have grown past it since, answers with
// a diverging epoch: the copy is fetched again, as after a cut (see
// part.diverged). An open that the copy would answer before any fetch
// names the epoch (a kept copy that ends where the cluster's log does, a
// copy the cluster's log end is now below) first asks the leader where
// that epoch ends (OffsetForLeaderEpoch: checkKeptCopy, checkLiveCopy).
// A fetch response's log
// start offset moves the copy's (DeleteRecords, retention: AdvanceStart),
// so records deleted on the cluster behave like local retention.
//
// Isolation: under read_committed (the default, as kcat and librdkafka),
// fetches ask for isolation level 1, so the copy ends at the last stable
// offset, and the batches of aborted transactions are left out as a Kafka
// consumer leaves them out (the response's aborted transactions and the
// ABORT markers); the copy then has gaps in its offsets, as after
// compaction. Under read_uncommitted everything up to the high watermark
// is kept. Control batches are kept and never rendered. The copy records
// the isolation level it was fetched at, the cluster id and each topic's
// id (logfs-follower.properties); opening it with another level, or for a
// topic deleted or created again, drops what no longer applies, and a copy
// of another cluster is refused.
//
// The copy's byte budget (Options.CopyBytes, 4 GiB by default) is kept by
// evicting the oldest segment of the partition read least recently, never
// one an open file needs; when open files hold more than the budget, the
// copy grows past it and says so once. Its segments are 128 MiB and never
// fsynced: it is a cache, and after a crash recovery cuts what was torn
// and the follower fetches it again. A clean unmount closes it cleanly; the
// next mount starts from what it holds.
//
// # Appends
//
// Produce builds batches with record.Builder (the bytes a local append
// writes, uncompressed unless compression.type) and sends them to the
// leader with acks=all as an idempotent producer of its own (produce.go):
// per partition a producer id, an epoch and sequence numbers, and up to
// five batches in flight. kgo's producer cuts batches itself, which is why
// this path is on kmsg. A write(2) to the append file is cut into as few
// batches of at most the topic's max.message.bytes as its lines need, of
// even sizes (a 1 MiB write of 1 KiB lines is two halves, not a full
// batch and a tiny one), sent without waiting for each other; the write
// returns once all are acknowledged. A line that alone is over the limit,
// or MESSAGE_TOO_LARGE, is EFBIG with nothing of the write produced.
//
// Sequence numbers make this safe: a broker appends a batch only after the
// one numbered before it, and answers a retry of one it has as a
// duplicate. A retry (a moved leader, a lost connection) sends the same
// bytes. A batch refused for good, or not acknowledged within
// delivery.timeout.ms (ETIMEDOUT; as with any Kafka producer it may still
// have been appended, and it is not sent again), moves the partition to
// the next epoch, which the broker then holds against every older batch:
// batches sent behind a failed one are numbered again in order, those of
// the same write are not sent again, and that write returns short (the
// lines before the failed batch), so the writer's loop sends the rest.
// Once a batch was sent, the write waits for its answer even if the
// writer is interrupted: EINTR after an append that went in would have
// the writer append it twice.
//
// # Errors
//
// Every error wraps what it means to a file system (see errors.go): the
// broker's error and message, and a storage sentinel or a syscall.Errno,
// so fs's one errno mapping needs no Kafka knowledge.
//
// # Concurrency
//
// Every exported method may be called concurrently. Lock order:
// Cluster.mu, then part.mu; part.fetchMu (one change of a copy at a time)
// is taken before either and never while waiting for the cluster with
// part.mu held. A partition's stream.mu (appends) is never held with
// another lock nor while waiting for the cluster; its sending token (one
// write's batches numbered together) is taken before it.
package kafka
