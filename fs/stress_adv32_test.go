package fs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAdv32ReadersDuringAppends: for a second, writers append through the
// mount while readers look up, stat and read offset/N, earliest, latest
// and time/0 (fresh and held open): every read is whole lines of values
// that were written, in offset order, never a zero byte, and no
// operation hangs.
func TestAdv32ReadersDuringAppends(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	part := filepath.Join(mp, "t", "0")
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			f, err := os.OpenFile(filepath.Join(part, "append"), os.O_WRONLY, 0)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for i := 0; !stop.Load(); i++ {
				var b bytes.Buffer
				for j := 0; j < 1+i%5; j++ {
					fmt.Fprintf(&b, "w%d.%d.%d:%s\n", w, i, j, strings.Repeat("v", (i*31+j)%300))
				}
				if _, err := f.Write(b.Bytes()); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	check := func(name string, b []byte) error {
		if len(b) > 0 && b[len(b)-1] != '\n' {
			return fmt.Errorf("%s: ends inside a line: %q", name, b[max(0, len(b)-40):])
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			return fmt.Errorf("%s: a zero byte at %d of %d", name, i, len(b))
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if l == "" {
				continue
			}
			var w, i, j int
			if _, err := fmt.Sscanf(l, "w%d.%d.%d:", &w, &i, &j); err != nil || l != fmt.Sprintf("w%d.%d.%d:%s", w, i, j, strings.Repeat("v", (i*31+j)%300)) {
				return fmt.Errorf("%s: torn line %q", name, l)
			}
		}
		return nil
	}
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			held, err := os.Open(filepath.Join(part, "offset", "0"))
			if err != nil {
				errs <- err
				return
			}
			defer held.Close()
			var got []byte
			for k := 0; !stop.Load(); k++ {
				names := []string{"offset/latest", "offset/earliest", "time/0", fmt.Sprintf("offset/%d", int64(k*7)%max(1, int64(p.EndOffset())))}
				name := names[k%len(names)]
				b, err := os.ReadFile(filepath.Join(part, name))
				if err == nil {
					err = check(name, b)
				}
				if err != nil {
					errs <- err
					return
				}
				more, err := io.ReadAll(held)
				if err != nil {
					errs <- err
					return
				}
				got = append(got, more...)
				if err := check("held offset/0", got); err != nil {
					errs <- err
					return
				}
			}
		}(r)
	}
	time.Sleep(time.Second)
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an operation hangs")
	}
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	b, err := os.ReadFile(filepath.Join(part, "offset", "0"))
	require.NoError(t, err)
	require.NoError(t, check("offset/0", b))
	require.Equal(t, int(p.EndOffset()), bytes.Count(b, []byte("\n")))
}
