// Package crashfs is a vfs.FS for tests. It wraps a real directory and can
// fail the k-th mutating operation or simulate a crash that loses what was
// not made durable, in the manner of pebble's vfs/errorfs and
// MemFS.CrashClone. The real paths let memory-mapped index files live next
// to the logs as in production.
//
// # Live state and model
//
// Every operation goes to the base FS at once, so the disk holds the live
// state and reads (ReadAt, Stat, ReadDir) see it. Alongside, the FS keeps
// what a crash could still undo:
//
//   - For each tracked file (one opened with O_WRONLY, O_RDWR, O_CREATE or
//     O_TRUNC through the FS), its unsynced writes (WriteAt, Truncate, and
//     the truncation an O_TRUNC open does) in order, each with the bytes it
//     replaced. The durable content is what the file held at its last
//     successful Sync, or when the FS first met it. It is never copied: a
//     crash reads the file back and rolls the writes back. So memory is the
//     bytes written since the last Sync plus the bytes they overwrote or
//     truncated away, and Sync costs nothing extra.
//   - The directory operations not yet durable, in order: the creation of a
//     file by OpenFile, each directory MkdirAll creates, Rename, Remove, and
//     each file and directory RemoveAll removes, one entry at a time.
//   - A private read-only descriptor on every file the model holds, so that
//     a removed or replaced file can be brought back with its content. A
//     file that has no open File, no unsynced write and no pending
//     operation is forgotten and its descriptor closed.
//
// Anything on disk that the FS has not changed counts as durable.
//
// # What makes things durable
//
//   - File.Sync makes the file's data and size durable, whichever handle
//     wrote them. It does not make the file's directory entry durable. A
//     Sync through a read-only handle is passed on but not counted.
//   - SyncDir(d) makes durable every pending operation on an entry of d. A
//     rename is atomic, so SyncDir of either of its directories makes all
//     of it durable, as journaling file systems do. An earlier pending
//     operation on an entry that a now-durable operation touches becomes
//     durable with it.
//   - A directory is an entry of its parent. A directory that MkdirAll
//     creates survives only through SyncDir of its parent, and if it does
//     not survive, everything below it is lost, synced or not.
//
// # What a crash leaves
//
// Crash (or the operation CrashAt chose) rewrites the disk, then closes
// every base handle and lock and fails every later call with ErrCrashed.
// Synced content and durable entries always survive. Then, per Mode:
//
//   - DropAll: nothing else. A file created whose directory was never
//     synced disappears, an unsynced rename is reverted (bringing back any
//     file it replaced), and an unsynced Remove or RemoveAll is undone: the
//     files come back with their durable content, read through the private
//     descriptors.
//   - KeepPrefix: per tracked file, the first i unsynced writes for a random
//     i; the i-th may be torn: whole, a random prefix of its bytes, or a
//     random subset of the 512-byte sectors it covers, the size then
//     reaching its end with zeros in the holes.
//   - Reorder: per tracked file, each unsynced write with probability 1/2,
//     applied in the order they were made.
//   - KeepAll: everything; the process died, the disk did not.
//
// In KeepPrefix and Reorder, each pending directory operation survives with
// probability 1/2, independently, but only if every entry it touches is,
// in the crash being built, as the operation found it. So the survivors form
// a history the file system could have had: a rename either happened or not
// (the file is never in both places nor in neither), a file renamed twice is
// in exactly one of the places it had, and the rename of a file whose
// creation was lost is lost too. Whatever is in a directory whose own entry
// does not survive is lost with it.
//
// # Fault injection
//
// Mutating operations are OpenFile with O_WRONLY, O_RDWR, O_CREATE or
// O_TRUNC, WriteAt, Truncate, Sync (of a File), Rename, Remove, RemoveAll,
// MkdirAll and SyncDir. Each is numbered from 0 in the order it takes the
// lock. FailAfter(k, err) makes operation k fail without effect;
// ShortWriteAfter(k, rng) makes a WriteAt write a strict prefix and report
// ENOSPC; FillAfter(k) makes the disk full from operation k on, until
// Free: what needs room fails with ENOSPC (an extending WriteAt writes
// what lies inside the file), the rest runs; CrashAt(k, cfg) crashes
// instead of running operation k. Ops returns the count, so a test can run
// its workload once and then loop k below the count, as pebble's
// TestDBWALRotationCrash does:
//
//	for k := 0; ; k++ {
//		fs := crashfs.New(vfs.Default)
//		fs.CrashAt(k, crashfs.CrashConfig{Mode: crashfs.KeepPrefix, Rand: rand.New(rand.NewPCG(seed, uint64(k)))})
//		runWorkload(fs) // stops at the first ErrCrashed
//		crashed, err := fs.Crashed()
//		require.NoError(t, err)
//		if !crashed {
//			break // k is past the last operation
//		}
//		recoverAndCheck(vfs.Default) // or a fresh crashfs.New
//	}
//
// # Not modelled
//
//   - Writes through memory mappings, which would bypass the FS. logfs
//     makes none: package index maps files read-only (File.Fd gives the
//     base descriptor) and writes them with WriteAt, so index files are
//     modelled like any other. CrashConfig.Mangle is the hook for a test
//     to damage files in ways the model does not make.
//   - Changes made by anything but this FS to what it tracks (Check catches
//     most); files created outside it count as durable once it meets them.
//   - Metadata other than names and sizes: permissions, times, ownership. A
//     file the crash brings back is recreated with mode 0644, a directory
//     with 0755.
//   - Lock files, which Lock passes through; symbolic links are followed
//     when met, and a non-regular file that must be brought back is an error.
//   - Data loss after a failed Sync: the writes stay pending, as if the
//     kernel had kept the dirty pages.
//   - Moving directories into one another: entries are modelled one by one,
//     and a crash that combines such renames into a cycle drops the
//     directories on it.
//
// # Concurrency
//
// The FS, its Files and its locks may be used from any number of
// goroutines. One mutex serializes every operation, I/O included, so a crash
// never sees half an operation. This is a test tool, not a fast path.
package crashfs
