package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/logfs/logfs/layout"
)

// mountProc is a `logfs mount` child process serving a data directory.
type mountProc struct {
	cmd    *exec.Cmd
	mp     string
	done   chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
	err    error
	once   sync.Once
	stopEr error
}

// startMount runs EXE mount --data DIR -o OPTS MP and waits until it is
// ready. The child gets SIGTERM if this process dies.
func (r *runner) startMount(ctx context.Context, dataDir, mp string, opts string) (*mountProc, error) {
	return r.startMountArgs(ctx, mp, "mount", "--data", dataDir, "-o", opts, mp)
}

// startMountArgs runs EXE ARGS…, a mount at mp, and waits until it is
// ready.
func (r *runner) startMountArgs(ctx context.Context, mp string, args ...string) (*mountProc, error) {
	return r.startServer(ctx, mp, r.o.Exe, args...)
}

// startFloor runs FLOOREXE bench-floor --size N MP: the go-fuse floor
// (package floorfs), a child process as the mount is.
func (r *runner) startFloor(ctx context.Context, mp string, size int64) (*mountProc, error) {
	return r.startFloorArgs(ctx, mp, "--size", strconv.FormatInt(size, 10))
}

// startFloorFrom starts the floor serving the bytes of file, as its data
// file: the readers' floor, whose lines must be the plain file's.
func (r *runner) startFloorFrom(ctx context.Context, mp, file string) (*mountProc, error) {
	return r.startFloorArgs(ctx, mp, "--from", file)
}

func (r *runner) startFloorArgs(ctx context.Context, mp string, args ...string) (*mountProc, error) {
	exe := r.o.FloorExe
	if exe == "" {
		exe = r.o.Exe
	}
	return r.startServer(ctx, mp, exe, append(append([]string{"bench-floor"}, args...), mp)...)
}

// startServer runs a FUSE server child that mounts at mp and says
// "ready:" on stderr, and waits until it has.
func (r *runner) startServer(ctx context.Context, mp, exe string, args ...string) (*mountProc, error) {
	if err := os.MkdirAll(mp, 0o755); err != nil {
		return nil, err
	}
	m := &mountProc{mp: mp, done: make(chan struct{})}
	m.cmd = exec.Command(exe, args...)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	pipe, err := m.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	r.mountMu.Lock()
	r.mounts = append(r.mounts, m)
	r.mountMu.Unlock()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		var once sync.Once
		for sc.Scan() {
			m.mu.Lock()
			m.stderr.WriteString(sc.Text() + "\n")
			m.mu.Unlock()
			if strings.Contains(sc.Text(), "ready:") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	select {
	case <-ready:
		return m, nil
	case <-m.done:
		return nil, fmt.Errorf("%s %s exited before it was ready (%v): %s", filepath.Base(exe), args[0], m.err, strings.TrimSpace(m.errors()))
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%s %s not ready after 60 s: %s", filepath.Base(exe), args[0], m.errors())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pid returns the server's process id.
func (m *mountProc) pid() int { return m.cmd.Process.Pid }

func (m *mountProc) errors() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stderr.String()
}

// stop unmounts (SIGTERM: the mount unmounts and closes the log cleanly),
// forcing a lazy unmount and a kill if that does not work in time.
func (m *mountProc) stop() error {
	m.once.Do(func() {
		select {
		case <-m.done:
		default:
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.done:
			case <-time.After(20 * time.Second):
				_ = unix.Unmount(m.mp, unix.MNT_DETACH)
				_ = m.cmd.Process.Kill()
				<-m.done
				m.stopEr = fmt.Errorf("logfs mount did not stop on SIGTERM: %s", m.errors())
			}
		}
		if len(mountsUnder(m.mp)) > 0 {
			if err := unix.Unmount(m.mp, unix.MNT_DETACH); err != nil {
				m.stopEr = errors.Join(m.stopEr, fmt.Errorf("unmount %s: %w", m.mp, err))
			}
		}
	})
	return m.stopEr
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// runTool runs a command with stdout going to out and returns how long it
// took from start to exit.
func runTool(ctx context.Context, out io.Writer, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if err != nil {
		return d, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return d, nil
}

// dropCache evicts a file's pages from the page cache, so that the next
// read of a mount's record file is answered by logfs, not by the kernel's
// copy of an earlier read (record files are opened with FOPEN_KEEP_CACHE).
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// toolPhases mounts the data set in dataDir and runs cat, tail, head and
// cat >> append on it and on plain files of the same content.
func (r *runner) toolPhases(ctx context.Context, dataDir string, p *payload, n int64) (err error) {
	o := &r.o
	size := p.size
	work := filepath.Join(r.root, fmt.Sprintf("mount-%d", size))
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, RemoveSynced(work)) }()

	// The plain file: the same text the mount shows in offset/0.
	plain := filepath.Join(work, "plain.txt")
	if err := writeRendering(plain, p, 0, n); err != nil {
		return err
	}
	logs, err := filepath.Glob(filepath.Join(dataDir, layout.PartitionDirName(topic, 0), "*"+layout.LogSuffix))
	if err != nil || len(logs) == 0 {
		return fmt.Errorf("no .log files in %s: %v", dataDir, err)
	}
	slices.Sort(logs)
	var logBytes int64
	for _, f := range logs {
		st, err := os.Stat(f)
		if err != nil {
			return err
		}
		logBytes += st.Size()
	}
	if _, err := Settle(dataDir); err != nil {
		return err
	}
	if _, err := Settle(work); err != nil {
		return err
	}
	mp := filepath.Join(work, "mnt")
	opts := fmt.Sprintf("segment.bytes=%d,flush.ms=-1,retention.ms=-1", o.SegmentBytes)
	m, err := r.startMount(ctx, dataDir, mp, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.stop()) }()
	rec0 := filepath.Join(mp, topic, "0", "offset", "0")
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer devNull.Close()
	renderBytes := n * int64(size+1)

	if o.wants(PhaseCat) {
		// One checked run of each, then timed runs into /dev/null.
		check := newExpectWriter(p, 0, n)
		if _, err := runTool(ctx, check, "cat", rec0); err != nil {
			return err
		}
		mres := Result{Phase: PhaseCat, Size: size, Subject: SubjectMount, What: "cat offset/0 > /dev/null", Records: n, Bytes: renderBytes}
		if err := check.done(); err != nil {
			mres.wrong(fmt.Errorf("cat offset/0: %w", err))
		}
		mres.Verified = n
		var cnt countWriter
		if _, err := runTool(ctx, &cnt, "cat", logs...); err != nil {
			return err
		}
		pres := Result{Phase: PhaseCat, Size: size, Subject: SubjectPlain, What: "cat *.log > /dev/null", Records: n, Bytes: logBytes,
			Note: "the partition's .log files"}
		if int64(cnt) != logBytes {
			pres.wrong(fmt.Errorf("cat of the .log files gave %d bytes, want %d", cnt, logBytes))
		}
		runs := max(o.Count, 3)
		mlat, plat := make([]int64, 0, runs), make([]int64, 0, runs)
		for range runs {
			if err := dropCache(rec0); err != nil {
				return err
			}
			d, err := runTool(ctx, devNull, "cat", rec0)
			if err != nil {
				return err
			}
			mlat = append(mlat, int64(d))
			if d, err = runTool(ctx, devNull, "cat", logs...); err != nil {
				return err
			}
			plat = append(plat, int64(d))
		}
		for _, x := range []struct {
			res *Result
			lat []int64
		}{{&mres, mlat}, {&pres, plat}} {
			slices.Sort(x.lat)
			x.res.Elapsed = time.Duration(x.lat[(len(x.lat)-1)/2]) // median run
			x.res.Ops = 1
			x.res.LatUnit = "run"
			x.res.P50, x.res.P99 = Percentiles(x.lat)
			x.res.Note = strings.TrimPrefix(x.res.Note+fmt.Sprintf("; median of %d runs", runs), "; ")
			r.add(*x.res)
		}
	}

	if o.wants(PhaseTail) {
		k := min(n, 10)
		err := r.toolLatency(ctx, p, []string{"tail", "-n", "10"},
			Result{Phase: PhaseTail, Size: size, Subject: SubjectMount, What: "tail -n 10 offset/0", LatUnit: "run", Note: "FUSE page cache dropped before each run"},
			Result{Phase: PhaseTail, Size: size, Subject: SubjectPlain, What: "tail -n 10 plain.txt", LatUnit: "run"},
			func() ([2]toolRead, error) {
				return [2]toolRead{{rec0, n - k, n}, {plain, n - k, n}}, dropCache(rec0)
			})
		if err != nil {
			return err
		}
	}

	if o.wants(PhaseHead) {
		rng := rand.New(rand.NewPCG(o.Seed, uint64(size)+1))
		err := r.toolLatency(ctx, p, []string{"head", "-n", "1"},
			Result{Phase: PhaseHead, Size: size, Subject: SubjectMount, What: "head -n 1 offset/N, random N", LatUnit: "run"},
			Result{Phase: PhaseHead, Size: size, Subject: SubjectPlain, What: "head -n 1 plain.txt", LatUnit: "run", Note: "first line: no lookup"},
			func() ([2]toolRead, error) {
				off := rng.Int64N(n)
				rec := filepath.Join(mp, topic, "0", "offset", strconv.FormatInt(off, 10))
				return [2]toolRead{{rec, off, off + 1}, {plain, 0, 1}}, nil
			})
		if err != nil {
			return err
		}
	}

	if o.wants(PhaseCatAppend) {
		if err := r.catAppend(ctx, work, mp, p, n); err != nil {
			return err
		}
	}
	if o.wants(PhaseReaders) {
		if err := r.readersPhase(ctx, work, m, rec0, plain, p, n); err != nil {
			return err
		}
	}
	if o.wants(PhasePread) {
		if err := r.preadPhase(ctx, work, rec0, plain, p, n); err != nil {
			return err
		}
	}
	if o.wants(PhaseOpen) {
		if err := r.openPhase(ctx, mp, plain, p, n); err != nil {
			return err
		}
	}
	if o.wants(PhaseConcurrent) {
		if err := r.concurrentPhase(ctx, work, mp, plain, p, n); err != nil {
			return err
		}
	}
	if o.wants(PhaseWrite) {
		if err := r.writePhase(ctx, work, mp, p); err != nil {
			return err
		}
	}
	return nil
}

// toolRead is one run of a line tool in a latency phase: the file it reads
// and the records [from, to) whose rendering it must print.
type toolRead struct {
	file     string
	from, to int64
}

// toolLatency runs a line tool (cmd, then the file) ToolRuns times on a file
// of the mount and on a plain file, in turn, checks every output against
// the rendering of the records it must show, and adds the two results,
// mount first, with one latency sample per run. next, called before each
// pair of runs, gives the two runs, the mount's first.
func (r *runner) toolLatency(ctx context.Context, p *payload, cmd []string, mres, pres Result, next func() ([2]toolRead, error)) error {
	res := [2]*Result{&mres, &pres}
	lat := [2][]int64{make([]int64, 0, r.o.ToolRuns), make([]int64, 0, r.o.ToolRuns)}
	for range r.o.ToolRuns {
		runs, err := next()
		if err != nil {
			return err
		}
		for i, run := range runs {
			check := newExpectWriter(p, run.from, run.to)
			d, err := runTool(ctx, check, cmd[0], slices.Concat(cmd[1:], []string{run.file})...)
			if err != nil {
				return err
			}
			if err := check.done(); err != nil {
				res[i].wrong(fmt.Errorf("%s %s: %w", strings.Join(cmd, " "), run.file, err))
			}
			res[i].Verified++
			res[i].Elapsed += d
			lat[i] = append(lat[i], int64(d))
		}
	}
	for i, res := range res {
		res.Ops = int64(len(lat[i]))
		res.P50, res.P99 = Percentiles(lat[i])
		r.add(*res)
	}
	return nil
}

// catAppend measures `cat FILE >> TOPIC/0/append` into a new topic of the
// mount against `cat FILE >> plain` and checks what the mount appended.
func (r *runner) catAppend(ctx context.Context, work, mp string, p *payload, n int64) error {
	size := p.size
	input := filepath.Join(work, "input.txt")
	if err := writeRendering(input, p, 0, n); err != nil {
		return err
	}
	inBytes := n * int64(size+1)
	appendTopic := fmt.Sprintf("append-%d", size)
	if err := os.Mkdir(filepath.Join(mp, appendTopic), 0o755); err != nil {
		return fmt.Errorf("create topic through the mount: %w", err)
	}
	appendFile := filepath.Join(mp, appendTopic, "0", "append")
	plainOut := filepath.Join(work, "appended.txt")
	// The go-fuse floor's sink takes each write and keeps nothing: what
	// FUSE alone costs a writer, mounted as logfs mounts.
	floorMp := filepath.Join(work, "append-floor")
	fl, err := r.startFloor(ctx, floorMp, 0)
	if err != nil {
		return err
	}
	defer fl.stop()
	if _, err := Settle(work); err != nil {
		return err
	}
	runs := max(r.o.Count, 3)
	mres := Result{Phase: PhaseCatAppend, Size: size, Subject: SubjectMount, What: "cat input >> TOPIC/0/append", LatUnit: "run"}
	fres := Result{Phase: PhaseCatAppend, Size: size, Subject: SubjectFloor, What: "cat input >> the floor's sink", LatUnit: "run"}
	pres := Result{Phase: PhaseCatAppend, Size: size, Subject: SubjectPlain, What: "cat input >> plain file", LatUnit: "run"}
	mlat, flat, plat := make([]int64, 0, runs), make([]int64, 0, runs), make([]int64, 0, runs)
	for range runs {
		for _, x := range []struct {
			lat  *[]int64
			file string
		}{{&mlat, appendFile}, {&flat, filepath.Join(floorMp, "append")}, {&plat, plainOut}} {
			f, err := os.OpenFile(x.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			t := time.Now()
			if _, err := runTool(ctx, f, "cat", input); err != nil {
				f.Close()
				return err
			}
			err = f.Close() // the shell closes after cat exits; a partial line would be appended here
			d := time.Since(t)
			if err != nil {
				return err
			}
			*x.lat = append(*x.lat, int64(d))
		}
	}
	// What the mount appended: `runs` copies of the input, record by record.
	want := int64(runs) * n
	check := newRepeatWriter(p, n, runs)
	rf, err := os.Open(filepath.Join(mp, appendTopic, "0", "offset", "0"))
	if err != nil {
		return err
	}
	_, err = io.Copy(check, rf)
	rf.Close()
	if err != nil {
		return err
	}
	if err := check.done(); err != nil {
		mres.wrong(fmt.Errorf("offset/0 of the appended topic: %w", err))
	}
	mres.Verified = want
	if st, err := os.Stat(plainOut); err != nil {
		return err
	} else if st.Size() != int64(runs)*inBytes {
		pres.wrong(fmt.Errorf("plain file holds %d bytes, want %d", st.Size(), int64(runs)*inBytes))
	}
	for _, x := range []struct {
		res *Result
		lat []int64
	}{{&mres, mlat}, {&fres, flat}, {&pres, plat}} {
		slices.Sort(x.lat)
		x.res.Elapsed = time.Duration(x.lat[(len(x.lat)-1)/2])
		x.res.Ops, x.res.Records, x.res.Bytes = 1, n, inBytes
		x.res.P50, x.res.P99 = Percentiles(x.lat)
		x.res.Note = fmt.Sprintf("%s input; median of %d runs", sizeCell(inBytes), runs)
		r.add(*x.res)
	}
	return nil
}
