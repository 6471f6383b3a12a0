package peers

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Log is what the harness drives. Every adapter numbers records from offset
// 0, contiguously, in append order, whatever the peer's own numbering is.
//
// A Log is used by one goroutine at a time, except that a Follower's Follow
// may run in other goroutines concurrently with Append.
type Log interface {
	// Name is the adapter's registry name ("raw", "liftbridge", ...).
	Name() string

	// Append appends the values of batch as consecutive records in one call
	// of the peer's batch API when it has one; ts[i] is the timestamp of
	// batch[i] (Unix milliseconds, strictly increasing across calls). Append
	// must not fsync; the values may be reused once Append returns.
	Append(batch [][]byte, ts []int64) error

	// Sync makes every record appended so far durable (fsync).
	Sync() error

	// LookupFirst returns the value of the record at offset off: what a
	// Kafka fetch starting at off has to find first. The slice is valid
	// until the next call on the Log.
	LookupFirst(off int64) ([]byte, error)

	// LookupTime returns the first offset whose timestamp is >= ts (Unix
	// milliseconds), or the next offset to be assigned when there is none;
	// ErrUnsupported when the peer has no time lookup.
	LookupTime(ts int64) (int64, error)

	// ReadAll reads every record from offset 0 in order, calling fn with
	// each value (valid only during the call), and returns how many records
	// it read.
	ReadAll(fn func(v []byte)) (int, error)

	// Close releases the log; the files stay in the directory.
	Close() error
}

// Follower is implemented by logs whose readers can wait at the end of the
// log for records that are not yet written (what `tail -f` needs). Only
// those take part in the mixed workload.
type Follower interface {
	// Follow calls fn for every record from offset from on, in order,
	// waiting at the end of the log for more, until fn returns false, ctx is
	// done (then it returns ctx.Err()) or an error occurs. It may run
	// concurrently with Append.
	Follow(ctx context.Context, from int64, fn func(off int64, v []byte) bool) error
}

// Config is what every adapter gets, identical for all peers in one run.
type Config struct {
	// SegmentBytes is the segment size target given to each peer (the raw
	// baseline has a single file and ignores it).
	SegmentBytes int64
}

// Factory opens the log stored in dir, creating it when dir is empty. It is
// called again on the same dir to measure reopening.
type Factory func(dir string, cfg Config) (Log, error)

// ---------------------------------------------------------------------------
// Adapter registry.
//
// Each adapter is one file, adapter_<name>.go, whose init calls Register.
// With the logfs adapter (adapter_logfs.go) registered, the report also
// prints logfs against every peer.
// ---------------------------------------------------------------------------

// Names the harness treats specially.
const (
	// RawName is the physical floor every other log is compared against.
	RawName = "raw"
	// LogfsName is the log compared against every peer when registered.
	LogfsName = "logfs"
)

var (
	adaptersMu sync.Mutex
	adapters   = map[string]Factory{}
)

// Register makes an adapter available under name. It panics on a duplicate
// name; it is meant to be called from init.
func Register(name string, f Factory) {
	adaptersMu.Lock()
	defer adaptersMu.Unlock()
	if _, dup := adapters[name]; dup {
		panic(fmt.Sprintf("peers: adapter %q registered twice", name))
	}
	adapters[name] = f
}

// Adapters returns the registered names in report order: raw, logfs (when
// registered), then the peers alphabetically.
func Adapters() []string {
	adaptersMu.Lock()
	defer adaptersMu.Unlock()
	names := make([]string, 0, len(adapters))
	for n := range adapters {
		names = append(names, n)
	}
	rank := func(n string) int {
		switch n {
		case RawName:
			return 0
		case LogfsName:
			return 1
		}
		return 2
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}

// Open opens the log of the named adapter in dir.
func Open(name, dir string, cfg Config) (Log, error) {
	adaptersMu.Lock()
	f, ok := adapters[name]
	adaptersMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q (have %v)", ErrUnknownAdapter, name, Adapters())
	}
	return f(dir, cfg)
}
