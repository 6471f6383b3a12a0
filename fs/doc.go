// Package fs mounts a storage.Log as a file system with go-fuse: topics
// and partitions are directories, records are read as files that grow, and
// lines written to a partition's append file become records.
//
//	srv, err := fs.Mount("/mnt/log", l, fs.Options{})
//	if errors.Is(err, fs.ErrNoFUSE) { … }   // one line for the user
//	srv.Wait()                              // until umount or srv.Unmount()
//	l.Close()
//
// # The tree
//
//	MOUNT/
//	  <topic>/                 mkdir: a new topic, one partition (bad name: EINVAL)
//	    <partition>/           mkdir of the next number: a new partition (others: EINVAL)
//	      append               write-only; each '\n'-terminated line is a record
//	      append.jsonl         write-only; each line is a JSON record (storage.ParseJSONRecord)
//	      info                 read-only JSON: start/end offsets, size, segments
//	      offset/
//	        <N>, <N>.jsonl     records from offset N on, growing
//	        earliest, latest   the log start and end offsets, resolved at lookup
//	      time/
//	        <T>, <T>.jsonl     records from the first whose timestamp >= T
//
// offset/ lists the segment base offsets (the first one raised to the log
// start offset) and earliest and latest; any decimal N between the log
// start and end offsets resolves (leading zeros allowed, so the 20-digit
// names of segment files work), N == end being an empty file that grows.
// Other names and offsets outside that range are ENOENT. time/ lists
// nothing; T is unix seconds, unix milliseconds (12 digits or more) or
// RFC 3339 or a date (storage.ParseTimestamp), and a T that does not parse is
// ENOENT. time/T is the same file as offset/N for the N that
// Partition.OffsetForTime finds when it is looked up. When no record is
// that recent, time/T is a file of its own (timefile.go): empty while
// records stamped before T arrive, then the records from the first one
// stamped T or later, whenever it was opened (what `tail -f time/T`
// wants). .jsonl renders each record as one JSON object (offset,
// timestamp, key, headers, value; non-UTF-8 bytes as {"base64":…}).
//
// Inode numbers are derived from the topic, the partition, the kind of
// node and the starting offset (see ino), so they are the same in every
// mount of the same data; time/T and earliest/latest share the inode of
// the offset/N they resolve to.
//
// # Memory
//
// The kernel keeps every name it looked up, with its node, until memory
// pressure evicts them, and go-fuse keeps a node for each. Record files
// have a name per offset and per timestamp, so the mount remembers, most
// recent first, the names of record files it handed out, and past
// Options.MaxRecordNames (4096) tells the kernel to drop the oldest
// (nodecache.go): a node no open file holds is then forgotten and freed.
// `go test -run TestStatFloodMemory ./cmd/logfs` with
// LOGFS_STAT_FLOOD=100000: the mount's RssAnon grew by 8 MiB over 100,000
// stats of different offset/N (134 MiB without the bound, same run).
//
// # Who may do what
//
// Every node belongs to the user who mounts (and to Options.Group, or that
// user's group) and shows the mode its kind allows at most (see dirs.go):
// the root and topics rwx (mkdir adds topics and partitions), partitions,
// offset/ and time/ r-x, record files and info r--, the append files -w-.
// The owner gets all of it; the group and others get Options.Share of it,
// and only with Options.AllowOther (without it the kernel lets no one else
// in, and the modes say so). A read-only mount shows no write bit, and is
// mounted ro, so every write is EROFS before the modes are looked at. The
// kernel enforces the modes (default_permissions): root passes as always,
// any other user gets EACCES for what the modes do not give. The mode
// mkdir asks for is ignored; chmod, chown, truncate and utimes are EPERM
// (EROFS on a read-only mount) except on the append files, which take the
// truncate to 0 and the new times that `>` and touch send.
//
// # Reading
//
// A record file is a regular file (read-only) whose st_size is the exact length
// of its rendering now, and whose mtime is the partition's last append
// (Partition.ModTime). Each open gets its own storage.View; a read at any
// position asks the view, which finds the place in the log through the
// sparse per-segment view index (<base>.viewindex) without rendering from
// the start: so pread anywhere returns what a sequential read would, and
// tail -n 10 of a large partition reads only its end. A node the kernel
// keeps cached holds no view and pins no segment; a reader's view does,
// so a reader finishes a segment that retention deletes under it.
//
// Reads go through the kernel's page cache (FOPEN_KEEP_CACHE): a file's
// pages stay cached from one open to the next, so a second read, and
// every small read (dd bs=4k, awk, a bufio.Scanner), is served by the
// kernel as from a plain file, and the kernel reads ahead in requests of
// up to MaxWrite while the reader copies: the mount raises its backing
// device's read-ahead window to ReadAheadKB (read_ahead_kb, 128 KiB by
// default) where it may (as root). With Options.DirectIO (mount -o
// direct_io) every read(2) reaches Read instead (FOPEN_DIRECT_IO) and
// nothing of the record files is cached by the kernel; a handle that reads
// on from where its last read stopped, twice in a row, then has its next
// two requests rendered in the background, each on a view of its own,
// while the reply to this one is written (see readahead.go).
//
// The kernel may send one open file several reads at once (its
// read-ahead does): each is rendered on a view of its own, up to four per
// handle kept between reads, so both CPUs render.
//
// A read that reaches a corrupt batch (or a gap that retention left)
// fails with EIO. Through the page cache the kernel would take a short
// reply for the end of the file, so such a read fails whole, and the
// kernel then asks for its pages one at a time: a reader gets every whole
// page before the bad batch and EIO at the page that holds it. With
// DirectIO it gets every byte before it, then EIO.
//
// docs/performance.md has the figures (logfs bench --mount).
//
// Requests are up to Options.MaxWrite (1 MiB by default: the kernel's
// limit of 256 pages), and st_blksize is the largest power of two not
// above it, so cat and other coreutils read a whole request at a time.
// Replies are written with writev from the rendered bytes; splice is off,
// as there is no file descriptor to splice from.
//
// # Caching and invalidation
//
// Names whose meaning cannot change (topics, partitions, their fixed
// files, offset/N) are cached by the kernel for EntryTimeout (1 s);
// earliest, latest and time/T are not cached at all, so they resolve
// afresh on every path lookup; a failed lookup is never cached, so an
// offset that does not exist yet appears as soon as it is appended.
//
// The bytes of a record file never change; it only grows. So the kernel
// is told not to drop its pages when it sees a new size or mtime
// (FUSE_EXPLICIT_INVAL_DATA), and a record file's attributes are never
// cached (timeout 0): whenever a read goes past the size the kernel knows,
// or a program stats the file, the kernel asks, and the answer is the
// size as of then, so a reader sees a record as soon as its append has
// returned, whoever appended it. The one page that can go stale is the
// last one of a read served short, at the end of what there was: the
// kernel keeps the rest of it as zeros. So a short read notes its end,
// and before the kernel is told of a size past it, the partition's
// notifier drops the pages from there on and stores the file's last
// bytes as they are now (NotifyContent, WriteCache); the append path through
// the mount does so before its write(2) returns, the notifier as soon as
// the partition changes, and Getattr and Lookup wait for it when it is
// still to be done (cache.go has the order of events and why the store).
// On a followed broker or a cluster, records already shown can be replaced
// by others at the same offsets (a cleaner's swap, a truncation, a copy
// reset; storage.Partition.Rewrites counts them): the next open of a file
// then drops its pages (no FOPEN_KEEP_CACHE), or, while a file opened
// before is still open through them, reads with direct I/O
// (recordNode.cacheState).
//
// Other attributes (directories, append, info) are cached for AttrTimeout
// (1 s) and invalidated when the partition changes: the notifier sleeps
// on Partition.Changed and, after every change (appends through the mount
// or any other way, rolls, retention), lets a burst settle for
// NotifyInterval (20 ms) and calls NotifyContent(-1, 0) on the info files
// whose attributes the kernel may hold fresh; an append through the mount
// also does it before its write(2) returns. Neither ever runs inside an
// operation on the inodes it invalidates (go-fuse's "Deadlocks"): the
// notifier is its own goroutine, and the append path invalidates other
// inodes than the append file it is writing. tail -f, which polls fstat
// every second on FUSE (a "remote" file system to coreutils), sees a new
// size within about a second; tail -f -s 0.1 polls ten times a second,
// and logfs consume --follow waits for each append.
//
// # Appending
//
// Each open of append or append.jsonl gets a handle with its own buffer
// for a partial line. A write(2) arrives as one WRITE (the append files
// use direct I/O, so the page cache does not re-chunk writes) of up to
// MaxWrite bytes; its complete lines, the first joined to the partial line
// the handle holds, go to the partition in one Partition.AppendValues
// (Append for append.jsonl): one batch, visible whole or not at all. The bytes after the last newline
// wait for the next write and are appended as a record when the file is
// released (RELEASE, after the last close: shells dup2 and flush early,
// so FLUSH means nothing). The kernel does not wait for RELEASE, so such a
// last, unterminated line may appear a moment after close(2) returns.
// Write offsets are ignored; the truncate to 0 that `>` sends (SETATTR)
// and new times are accepted and change nothing. In append an empty line
// is a record with an empty value and '\r' is kept; in append.jsonl blank
// lines are skipped. Concurrent writers through different opens never
// tear each other's lines; writers sharing one open file (one fd
// inherited by two processes) share its partial line, as with any file.
//
// A write that fails appends nothing of itself. A line whose record would
// exceed max.message.bytes fails its write with EFBIG and is dropped
// whole, also the part of it an earlier write buffered; when the line is
// still growing, the rest of it is refused (EFBIG) up to its newline.
// When only the bytes after the last newline are already too long, the
// complete lines are appended and the write is short, so the writer's
// next write(2) gets the EFBIG. A line of append.jsonl that is not a
// record object fails its write with EINVAL, dropped the same way. ENOSPC
// and EIO leave the handle as it was: the write can be retried. fsync(2)
// on an append file returns once every record of the partition appended
// so far is durable (Partition.Sync); a buffered partial line is not a
// record yet. On a read-only mount opening an append file for writing is
// EROFS.
//
// # Errors
//
// toErrno (errno.go) is the one place that maps an error to an errno,
// and the cause is logged once, at Debug for what callers ask wrongly and
// higher for failures of the log:
//
//	storage.ErrOffsetOutOfRange, ErrNoTopic, ErrNoPartition   ENOENT
//	storage.ErrReadOnly                                       EROFS
//	storage.ErrRecordTooLarge, ErrOffsetsExhausted            EFBIG
//	storage.ErrInvalidTopic, ErrInvalidPartition,
//	  ErrInvalidRecord, ErrInvalidTimestamp, ErrInvalidConfig EINVAL
//	storage.ErrTopicExists, ErrTopicCollides (a.b beside a_b) EEXIST
//	corruption (storage.IsCorruption)                         EIO
//	storage.ErrDeleted (retention deleted unread records)     EIO
//	context.Canceled, context.DeadlineExceeded                EINTR
//	a syscall.Errno inside (ENOSPC, EDQUOT, EIO …)            itself
//	anything else (ErrClosed, ErrFailed …)                    EIO
//
// A name that cannot exist (time/yesterday, offset/-1) is ENOENT at
// lookup, not EINVAL. Unlink, rmdir, rename, create, link, symlink and
// mknod are EPERM (EROFS on a read-only mount); opening a record or info
// file for writing is EACCES. A corrupt batch fails the read that reaches
// it with EIO (the bytes before it are returned first) and is logged with
// the file and position; the mount goes on. A panic in an operation is
// recovered by go-fuse's PanicHandler, logged with its stack, and answered
// with EIO.
//
// # Concurrency
//
// Operations run concurrently, one goroutine each (go-fuse). Nodes hold
// no mutable state but a record file's tailPage (its own mutex) and the
// partition's shared partState, whose mutex guards its set of record
// nodes the kernel holds (a lookup of a file the kernel already has
// returns that node, so go-fuse never has to choose between two), its set
// of inodes with fresh attributes and its queue of files read short; it
// is held around go-fuse's NewInode but never while calling the kernel or
// storage. Lock order: appendHandle.mu, then partState.mu or
// logFS.unfinishedMu (the handles holding an unfinished line); a read holds
// partState.gate, then tailPage.gate, shared; dropShort takes
// partState.dropMu, partState.gate, partState.mu, then tailPage.mu;
// logFS.mu, logFS.releaseMu and recordHandle.mu are taken alone. A
// RELEASE that appends an unfinished line to a cluster does it on a
// goroutine of its own, which the mount's shutdown waits for. Reads of one open file
// run in parallel, each on a view of its own (a View serialises its own
// reads); with DirectIO they are serialised by the handle. Appends
// through any number of opens are serialised by the partition.
//
// # Mounting
//
// As root Mount uses mount(2) directly (falling back to fusermount3 only
// if that exists); otherwise it needs fusermount3. Without /dev/fuse, or
// neither root nor fusermount3, Mount fails with an error wrapping
// ErrNoFUSE whose text is one line for the user. The mount point must be
// an empty directory that is not a mount point (ErrMountpoint). Preflight
// makes the same checks (and whether this process may open /dev/fuse)
// without mounting, so that a command can refuse before it opens the data
// directory. Wait
// returns when the file system is unmounted, by Unmount or by an external
// umount; the caller then closes the log.
package fs
