package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func TestToErrno(t *testing.T) {
	corrupt := &record.CorruptError{Err: record.ErrCorrupt}
	for name, tc := range map[string]struct {
		err  error
		want syscall.Errno
	}{
		"nil":             {nil, 0},
		"out of range":    {fmt.Errorf("x: %w", storage.ErrOffsetOutOfRange), syscall.ENOENT},
		"deleted":         {fmt.Errorf("x: %w", storage.ErrDeleted), syscall.EIO},
		"no topic":        {storage.ErrNoTopic, syscall.ENOENT},
		"no partition":    {storage.ErrNoPartition, syscall.ENOENT},
		"read-only":       {storage.ErrReadOnly, syscall.EROFS},
		"too large":       {storage.ErrRecordTooLarge, syscall.EFBIG},
		"bad topic":       {storage.ErrInvalidTopic, syscall.EINVAL},
		"bad partition":   {storage.ErrInvalidPartition, syscall.EINVAL},
		"bad record":      {storage.ErrInvalidRecord, syscall.EINVAL},
		"bad timestamp":   {storage.ErrInvalidTimestamp, syscall.EINVAL},
		"topic exists":    {storage.ErrTopicExists, syscall.EEXIST},
		"enospc":          {&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, syscall.ENOSPC},
		"corrupt":         {fmt.Errorf("read: %w", corrupt), syscall.EIO},
		"corrupt+errno":   {errors.Join(corrupt, syscall.ENOSPC), syscall.EIO},
		"canceled":        {context.Canceled, syscall.EINTR},
		"closed":          {storage.ErrClosed, syscall.EIO},
		"anything else":   {errors.New("boom"), syscall.EIO},
		"partition fails": {storage.ErrFailed, syscall.EIO},
	} {
		t.Run(name, func(t *testing.T) {
			got, _ := toErrno(tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestIno(t *testing.T) {
	seen := map[uint64]string{}
	for _, topic := range []string{"a", "b", "orders", "orders0"} {
		for p := 0; p < 3; p++ {
			for k := kindTopic; k <= kindJSONL; k++ {
				for _, off := range []record.Offset{0, 1, 1 << 40} {
					n := ino(topic, p, k, off)
					key := fmt.Sprint(topic, p, k, off)
					require.Equal(t, n, ino(topic, p, k, off), "stable")
					require.Greater(t, n, uint64(rootIno))
					require.Less(t, n, uint64(1<<63))
					require.NotContains(t, seen, n, "%s collides with %s", key, seen[n])
					seen[n] = key
				}
			}
		}
	}
}

func TestParseNames(t *testing.T) {
	for name, want := range map[string]struct {
		off record.Offset
		ok  bool
	}{
		"0": {0, true}, "42": {42, true}, "00000000000000000042": {42, true},
		"": {}, "-1": {}, "4x": {}, "99999999999999999999": {}, "earliest": {},
	} {
		off, ok := parseOffset(name)
		require.Equal(t, want.ok, ok, name)
		if ok {
			require.Equal(t, want.off, off, name)
		}
	}
	base, f := splitFormat("12.jsonl")
	require.Equal(t, "12", base)
	require.Equal(t, storage.JSONL, f)
	base, f = splitFormat("latest")
	require.Equal(t, "latest", base)
	require.Equal(t, storage.Values, f)
	require.Equal(t, "/mnt/a b", unescapeMountinfo(`/mnt/a\040b`))
}

// newTestPartition opens a log with one partition and the fs state around
// it, without mounting.
func newTestPartition(t *testing.T, defaults storage.Overrides) (*storage.Partition, *partState) {
	t.Helper()
	l, err := storage.Open(t.TempDir(), storage.Options{Logger: quietLogger(), Defaults: defaults, RetentionCheckInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, l.Check())
		require.NoError(t, l.Close())
	})
	top, err := l.CreateTopic("t", 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	f := newLogFS(l, Options{Logger: quietLogger()}.withDefaults(l))
	t.Cleanup(f.shutdown)
	return p, f.partition(p)
}

// newMountedPartition opens a log with one partition, topic, to mount in
// a test; the log is closed when the test ends, after its own defers.
func newMountedPartition(t *testing.T, topic string) (*storage.Log, *storage.Partition) {
	t.Helper()
	l, err := storage.Open(t.TempDir(), storage.Options{Logger: quietLogger(), RetentionCheckInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	top, err := l.CreateTopic(topic, 1, nil)
	require.NoError(t, err)
	p, err := top.Partition(0)
	require.NoError(t, err)
	return l, p
}

// values reads the partition's values, one per line.
func values(t *testing.T, p *storage.Partition) []string {
	t.Helper()
	v, err := p.NewView(storage.Values, p.StartOffset())
	require.NoError(t, err)
	defer v.Close()
	b, err := io.ReadAll(io.NewSectionReader(v, 0, 1<<40))
	require.NoError(t, err)
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestAppendFraming(t *testing.T) {
	p, ps := newTestPartition(t, nil)
	h := &appendHandle{n: &appendNode{ps: ps}}
	ctx := context.Background()
	write := func(s string) {
		n, errno := h.Write(ctx, []byte(s), 0)
		require.Zero(t, errno)
		require.Equal(t, uint32(len(s)), n)
	}
	write("one\ntw")
	require.Equal(t, []string{"one"}, values(t, p))
	write("o\nthr")
	write("ee")
	require.Equal(t, []string{"one", "two"}, values(t, p))
	write("\n\nfour\nfive\nsi")
	require.Equal(t, []string{"one", "two", "three", "", "four", "five"}, values(t, p))
	// One write, one batch: "", four and five share an offset range of
	// one batch.
	require.Equal(t, record.Offset(6), p.EndOffset())
	require.Zero(t, h.Flush(ctx))
	require.Equal(t, record.Offset(6), p.EndOffset(), "FLUSH does not commit")
	require.Zero(t, h.Release(ctx))
	require.Equal(t, []string{"one", "two", "three", "", "four", "five", "si"}, values(t, p))
}

func TestAppendTooLarge(t *testing.T) {
	p, ps := newTestPartition(t, storage.Overrides{"max.message.bytes": 1000})
	h := &appendHandle{n: &appendNode{ps: ps}}
	ctx := context.Background()
	big := strings.Repeat("x", 1000)

	// A complete line over the limit fails its whole write.
	_, errno := h.Write(ctx, []byte("ok\n"+big+"\nalso\n"), 0)
	require.Equal(t, syscall.EFBIG, errno)
	require.Empty(t, values(t, p))

	// A partial line that grows over the limit fails, with what an earlier
	// write buffered of it, and the rest of the line is refused up to and
	// including the write that holds its newline: the writer is told of
	// every write it is not taken from, never left to think a line went in.
	n, errno := h.Write(ctx, []byte("a\n"+big[:600]), 0)
	require.Zero(t, errno)
	require.Equal(t, uint32(602), n)
	_, errno = h.Write(ctx, []byte(big[:600]), 0)
	require.Equal(t, syscall.EFBIG, errno)
	_, errno = h.Write(ctx, []byte("more"), 0)
	require.Equal(t, syscall.EFBIG, errno)
	_, errno = h.Write(ctx, []byte("end of it\nlost\n"), 0)
	require.Equal(t, syscall.EFBIG, errno)
	n, errno = h.Write(ctx, []byte("b\n"), 0)
	require.Zero(t, errno)
	require.Equal(t, uint32(2), n)
	require.Equal(t, []string{"a", "b"}, values(t, p))

	// A line that began in an earlier write and ends over the limit: its
	// end is refused, and refused again when the writer sends it again (as
	// after the short count the kernel makes of a later request's error).
	n, errno = h.Write(ctx, []byte(big[:600]), 0)
	require.Zero(t, errno)
	require.Equal(t, uint32(600), n)
	_, errno = h.Write(ctx, []byte(big[:500]+"\nc\n"), 0)
	require.Equal(t, syscall.EFBIG, errno)
	_, errno = h.Write(ctx, []byte(big[:500]+"\nc\n"), 0)
	require.Equal(t, syscall.EFBIG, errno, "the end of the line, sent again")
	_, errno = h.Write(ctx, []byte(big[:500]+"\nc\n"), 0)
	require.Equal(t, syscall.EFBIG, errno, "and again")
	_, errno = h.Write(ctx, []byte(big[:300]), 0)
	require.Equal(t, syscall.EFBIG, errno, "a first request shorter than the end sent again")
	n, errno = h.Write(ctx, []byte("c\n"), 0)
	require.Zero(t, errno)
	require.Equal(t, uint32(2), n)
	require.Zero(t, h.Release(ctx))
	require.Equal(t, []string{"a", "b", "c"}, values(t, p))

	// Complete lines then an oversized tail: the lines go in, the write is
	// short, and the rest fails on its own.
	h = &appendHandle{n: &appendNode{ps: ps}}
	data := "d\n" + big
	n, errno = h.Write(ctx, []byte(data), 0)
	require.Zero(t, errno)
	require.Equal(t, uint32(2), n)
	_, errno = h.Write(ctx, []byte(data[n:]), 0)
	require.Equal(t, syscall.EFBIG, errno)
	require.Zero(t, h.Release(ctx))
	require.Equal(t, []string{"a", "b", "c", "d"}, values(t, p))
}

func TestAppendJSONL(t *testing.T) {
	p, ps := newTestPartition(t, nil)
	h := &appendHandle{n: &appendNode{ps: ps, jsonl: true}}
	ctx := context.Background()
	_, errno := h.Write(ctx, []byte(`{"value":"v1","key":"k","timestamp":1700000000000,"headers":{"h":"x"}}`+"\n\n   \n"+`{"val`), 0)
	require.Zero(t, errno)
	_, errno = h.Write(ctx, []byte(`ue":"v2"}`+"\n"+`{"nope":1}`+"\n"), 0)
	require.Equal(t, syscall.EINVAL, errno, "a bad line fails the write")
	_, errno = h.Write(ctx, []byte(`ue":"v2"}`+"\n"+`{"value":null}`+"\n"), 0)
	require.Zero(t, errno, "the write again, without the bad line")
	require.Zero(t, h.Release(ctx))

	r, err := p.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	rec, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, "v1", string(rec.Value))
	require.Equal(t, "k", string(rec.Key))
	require.Equal(t, int64(1700000000000), rec.Timestamp)
	require.Len(t, rec.Headers, 1)
	rec, err = r.Next()
	require.NoError(t, err)
	require.Equal(t, "v2", string(rec.Value))
	rec, err = r.Next()
	require.NoError(t, err)
	require.Nil(t, rec.Value)
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)

	// A bad line that began in an earlier write: its end, sent again, is
	// refused with the same error, and the next line goes in.
	h = &appendHandle{n: &appendNode{ps: ps, jsonl: true}}
	_, errno = h.Write(ctx, []byte(`{"value":"v3`), 0)
	require.Zero(t, errno)
	_, errno = h.Write(ctx, []byte(`", "bad"}`+"\n"), 0)
	require.Equal(t, syscall.EINVAL, errno)
	_, errno = h.Write(ctx, []byte(`", "bad"}`+"\n"), 0)
	require.Equal(t, syscall.EINVAL, errno, "sent again")
	_, errno = h.Write(ctx, []byte(`{"value":"v4"}`+"\n"), 0)
	require.Zero(t, errno)
	require.Zero(t, h.Release(ctx))
	rec, err = r.Next()
	require.NoError(t, err)
	require.Equal(t, "v4", string(rec.Value))
}

// TestAppendPartialBudget: unfinished lines of all handles together stay
// under PartialBudget; past it a write fails with ENOBUFS and changes
// nothing, and room comes back as lines end or handles close (issue 14,
// point 4).
func TestAppendPartialBudget(t *testing.T) {
	was := PartialBudget
	PartialBudget = 2500
	defer func() { PartialBudget = was }()
	p, ps := newTestPartition(t, storage.Overrides{"max.message.bytes": 2000})
	ctx := context.Background()
	line := strings.Repeat("x", 1000)
	h1 := &appendHandle{n: &appendNode{ps: ps}}
	h2 := &appendHandle{n: &appendNode{ps: ps}}
	h3 := &appendHandle{n: &appendNode{ps: ps}}
	for _, h := range []*appendHandle{h1, h2} {
		n, errno := h.Write(ctx, []byte(line), 0)
		require.Zero(t, errno)
		require.Equal(t, uint32(1000), n)
	}
	_, errno := h3.Write(ctx, []byte(line), 0)
	require.Equal(t, syscall.ENOBUFS, errno, "a third unfinished line goes over the total")
	require.Equal(t, int64(2000), ps.f.partial.Load())

	// A complete line needs no room; a tail that finds none is left to
	// the next write (a short count).
	n, errno := h3.Write(ctx, []byte("whole\n"+line), 0)
	require.Zero(t, errno)
	require.Equal(t, uint32(6), n)

	// h1's line ends: its room comes back.
	_, errno = h1.Write(ctx, []byte("\n"), 0)
	require.Zero(t, errno)
	require.Equal(t, int64(1000), ps.f.partial.Load())
	n, errno = h3.Write(ctx, []byte(line), 0)
	require.Zero(t, errno)
	require.Equal(t, uint32(1000), n)
	require.Zero(t, h2.Release(ctx))
	require.Zero(t, h3.Release(ctx))
	require.Zero(t, ps.f.partial.Load(), "closed handles hold nothing")
	require.Equal(t, []string{"whole", line, line, line}, values(t, p))
}
