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
	"time"
)

// The reader phases: programs that read the mount as people read files,
// each against the same program on a plain file of the same text, in the
// same run. See the package documentation for the table of phases.

// Pass names of a mount row: whether the mount had the file cached.
const (
	PassFirst  = "first"  // the kernel's cache of the mount's file dropped first
	PassSecond = "second" // right after a first read, the cache as it left it
)

// readerTool is a program that reads a whole file: how it is run, its read
// size (for the table) and how its output is checked.
type readerTool struct {
	name  string
	reads string // its read(2) size, as measured on the mount
	// run runs the tool on file and returns its elapsed time and output.
	run func(ctx context.Context, file string) (time.Duration, []byte, error)
	// want is the output it must print for a file of n lines of size
	// bytes each (with '\n'); nil when it prints nothing.
	want func(n, size int64) string
	// named says the tool prints the file's name after a blank (wc).
	named bool
}

// execTool is a readerTool that runs a command with the file as its last
// argument; stdout is kept when keepOut, else it goes to /dev/null.
func execTool(keepOut bool, name string, args ...string) func(ctx context.Context, file string) (time.Duration, []byte, error) {
	return func(ctx context.Context, file string) (time.Duration, []byte, error) {
		var out bytes.Buffer
		var w io.Writer = &out
		if !keepOut {
			// A file, not a Writer: the tool writes to /dev/null itself,
			// as it would from a shell, instead of into a pipe.
			devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				return 0, nil, err
			}
			defer devNull.Close()
			w = devNull
		}
		d, err := runTool(ctx, w, name, append(slices.Clone(args), file)...)
		return d, out.Bytes(), err
	}
}

// scanLines is the Go reader: bufio.Scanner with its default buffer, in
// this process.
func scanLines(_ context.Context, file string) (time.Duration, []byte, error) {
	t := time.Now()
	f, err := os.Open(file)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
	}
	d := time.Since(t)
	if err := sc.Err(); err != nil {
		return d, nil, err
	}
	return d, []byte(strconv.Itoa(n) + "\n"), nil
}

func lines(n, _ int64) string { return strconv.FormatInt(n, 10) + "\n" }

// readerTools returns the readers of the readers phase that this machine
// has; the others are listed in skipped. Python is run as its real
// executable (not a pyenv shim script, whose start would be timed).
func readerTools() (tools []readerTool, skipped []string) {
	dd := func(bs string) readerTool {
		return readerTool{name: "dd bs=" + bs, reads: bs, run: func(ctx context.Context, file string) (time.Duration, []byte, error) {
			d, err := runTool(ctx, io.Discard, "dd", "if="+file, "of=/dev/null", "bs="+bs)
			return d, nil, err
		}}
	}
	tools = []readerTool{
		dd("4k"), dd("64k"), dd("1M"),
		{name: "cat", reads: "st_blksize", run: execTool(false, "cat")},
		{name: "wc -l", reads: "16 KiB", run: execTool(true, "wc", "-l"), want: lines, named: true},
	}
	if _, err := exec.LookPath("mawk"); err == nil {
		tools = append(tools, readerTool{name: "mawk END{print NR}", reads: "4 KiB", run: execTool(true, "mawk", "END{print NR}"), want: lines})
	} else {
		skipped = append(skipped, "mawk")
	}
	tools = append(tools, readerTool{name: "Go bufio.Scanner", reads: "4 KiB", run: scanLines, want: lines})
	if py := pythonExe(); py != "" {
		tools = append(tools,
			readerTool{name: "python for line in f", reads: "8 KiB", want: lines,
				run: execTool(true, py, "-c", "import sys\nn = 0\nfor line in open(sys.argv[1]):\n    n += 1\nprint(n)")},
			readerTool{name: "python f.read(1 MiB)", reads: "1 MiB, unaligned", want: func(n, size int64) string { return strconv.FormatInt(n*size, 10) + "\n" },
				run: execTool(true, py, "-c", "import sys\nf = open(sys.argv[1], 'rb')\nt = 0\nwhile True:\n    b = f.read(1 << 20)\n    if not b:\n        break\n    t += len(b)\nprint(t)")})
	} else {
		skipped = append(skipped, "python3")
	}
	// Values hold no '_' (see payload): -v counts every line, and grep
	// still searches every one.
	tools = append(tools, readerTool{name: "grep -c -v _", reads: "96 KiB", run: execTool(true, "grep", "-c", "-v", "_"), want: lines})
	return tools, skipped
}

var (
	pythonOnce sync.Once
	pythonPath string
)

// pythonExe returns the path of the python3 interpreter itself, or "".
func pythonExe() string {
	pythonOnce.Do(func() {
		out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		if err == nil {
			pythonPath = strings.TrimSpace(string(out))
		}
	})
	return pythonPath
}

// checkOutput compares a tool's output with what it must print.
func checkOutput(t readerTool, out []byte, n, size int64) error {
	if t.want == nil {
		return nil
	}
	got, want := string(out), t.want(n, size)
	if t.named {
		if num, _, ok := strings.Cut(got, " "); ok {
			got = num + "\n"
		}
	}
	if got != want {
		return fmt.Errorf("%s printed %q, want %q", t.name, strings.TrimSpace(string(out)), strings.TrimSpace(want))
	}
	return nil
}

// readersPhase runs every reader on offset/0 of the mount, a first read
// (the kernel's cache of the file dropped) and a second one right after,
// and on the plain file of the same text, in turn, max(Count, 3) times;
// each row is the median run. The mount's RSS before and after goes in the
// note: it must not grow with what the mount served.
func (r *runner) readersPhase(ctx context.Context, work string, m *mountProc, rec0, plain string, p *payload, n int64) (err error) {
	size := int64(p.size + 1)
	tools, skipped := readerTools()
	runs := max(r.o.Count, 3)
	// The floor: a go-fuse file of the plain file's bytes, served from
	// memory, through the page cache as logfs serves record files. Its
	// lines are the plain file's: a reader that works per line (Python,
	// mawk, a Scanner) does the same work on the three.
	fl, err := r.startFloorFrom(ctx, filepath.Join(work, "readers-floor"), plain)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fl.stop()) }()
	floorData := filepath.Join(fl.mp, "data")
	rssBefore := processRSS(m.pid())
	for _, t := range tools {
		mk := func(subj, pass, file string) Result {
			what := fmt.Sprintf("%s %s", t.name, file)
			if pass != "" {
				what += " (" + pass + " read)"
			}
			return Result{Phase: PhaseReaders, Size: p.size, Subject: subj, Case: t.name, Pass: pass, What: what,
				LatUnit: "run", Records: n, Bytes: n * size, Note: "reads " + t.reads}
		}
		res := []Result{mk(SubjectMount, PassFirst, "offset/0"), mk(SubjectMount, PassSecond, "offset/0"), mk(SubjectPlain, "", "plain.txt"),
			mk(SubjectFloor, PassFirst, "the floor's file"), mk(SubjectFloor, PassSecond, "the floor's file")}
		files := []string{rec0, rec0, plain, floorData, floorData}
		lat := make([][]int64, len(res))
		for range runs {
			for i, file := range files {
				if res[i].Pass == PassFirst {
					if err := dropCache(file); err != nil {
						return err
					}
				}
				d, out, err := t.run(ctx, file)
				if err != nil {
					return err
				}
				if err := checkOutput(t, out, n, size); err != nil {
					res[i].wrong(err)
				}
				if t.want != nil {
					res[i].Verified++
				}
				lat[i] = append(lat[i], int64(d))
			}
		}
		for i := range res {
			medianRun(&res[i], lat[i])
			r.add(res[i])
		}
	}
	if len(skipped) > 0 {
		r.logf("readers: not on this machine, skipped: %s", strings.Join(skipped, ", "))
	}
	if rssAfter := processRSS(m.pid()); rssBefore > 0 && rssAfter > 0 {
		r.rep.MountRSS = append(r.rep.MountRSS, MountRSS{Size: p.size, Before: rssBefore, After: rssAfter, Served: int64(runs) * int64(2*len(tools)) * n * size})
	}
	return nil
}

// medianRun sets a one-operation result from the latencies of its runs:
// the median run's time, p50 and p99.
func medianRun(res *Result, lat []int64) {
	res.P50, res.P99 = Percentiles(lat) // sorts
	res.Elapsed = time.Duration(lat[(len(lat)-1)/2])
	res.Ops = 1
	res.Note = strings.TrimPrefix(res.Note+fmt.Sprintf("; median of %d runs", len(lat)), "; ")
}

// processRSS returns VmRSS of a process in bytes, 0 if unknown.
func processRSS(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	st, err := procMemory(pid, "")
	if err != nil {
		return 0
	}
	return st.RSS
}

// preadPhase reads 4 KiB at random positions of offset/0 with pread(2),
// each timed: first at positions not read since the kernel's cache of the
// file was dropped, then at the same positions again; the same on the
// plain file. Every read is checked.
func (r *runner) preadPhase(ctx context.Context, work, rec0, plain string, p *payload, n int64) (err error) {
	const readSize = 4096
	size := int64(p.size + 1)
	total := n * size
	if total < 2*readSize {
		return nil
	}
	rng := rand.New(rand.NewPCG(r.o.Seed, uint64(p.size)+2))
	k := min(r.o.Lookups, 2000)
	pos := make([]int64, k)
	for i := range pos {
		pos[i] = rng.Int64N(total - readSize)
	}
	if err := dropCache(rec0); err != nil {
		return err
	}
	mf, err := os.Open(rec0)
	if err != nil {
		return err
	}
	defer mf.Close()
	pf, err := os.Open(plain)
	if err != nil {
		return err
	}
	defer pf.Close()
	// The floor: a go-fuse file of as many bytes, served from memory
	// through the page cache (its bytes are not the mount's, so they are
	// not checked).
	fl, err := r.startFloor(ctx, filepath.Join(work, "pread-floor"), total)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fl.stop()) }()
	floorData := filepath.Join(fl.mp, "data")
	if err := dropCache(floorData); err != nil {
		return err
	}
	ff, err := os.Open(floorData)
	if err != nil {
		return err
	}
	defer ff.Close()
	buf, want := make([]byte, readSize), make([]byte, 0, readSize+2*size)
	timeReads := func(f *os.File, res *Result) error {
		lat := make([]int64, 0, len(pos))
		for _, at := range pos {
			if err := ctx.Err(); err != nil {
				return err
			}
			t := time.Now()
			k, err := f.ReadAt(buf, at)
			lat = append(lat, int64(time.Since(t)))
			if err != nil && !(err == io.EOF && k == readSize) {
				return fmt.Errorf("pread %s at %d: %w", f.Name(), at, err)
			}
			if res.Subject == SubjectFloor {
				continue
			}
			want = want[:0]
			for off := at / size; off*size < at+readSize && off < n; off++ {
				want = p.appendLine(want, off)
			}
			from := at % size
			if !bytes.Equal(buf[:k], want[from:from+readSize]) {
				res.wrong(fmt.Errorf("pread at %d: not the bytes of a sequential read", at))
			}
			res.Verified++
		}
		res.Ops = int64(len(lat))
		res.P50, res.P99 = Percentiles(lat)
		for _, d := range lat {
			res.Elapsed += time.Duration(d)
		}
		res.Bytes = res.Ops * readSize
		return nil
	}
	// twice reads f at the positions twice, once with its cache dropped
	// (new positions) and once again (positions read before).
	twice := func(f *os.File, subject, what string) error {
		for _, c := range []struct {
			name, pass string
		}{{"new position", PassFirst}, {"position read before", PassSecond}} {
			res := Result{Phase: PhasePread, Size: p.size, Subject: subject, Case: c.name, Pass: c.pass, LatUnit: "pread",
				What: fmt.Sprintf("pread 4 KiB of %s at %d random positions (%s)", what, len(pos), c.name)}
			if err := timeReads(f, &res); err != nil {
				return err
			}
			r.add(res)
		}
		return nil
	}
	if err := twice(mf, SubjectMount, "offset/0"); err != nil {
		return err
	}
	pres := Result{Phase: PhasePread, Size: p.size, Subject: SubjectPlain, Case: "new position", LatUnit: "pread",
		What: fmt.Sprintf("pread 4 KiB of plain.txt at the same %d positions", len(pos))}
	if err := timeReads(pf, &pres); err != nil {
		return err
	}
	r.add(pres)
	pres.Case = "position read before"
	r.add(pres)
	return twice(ff, SubjectFloor, "the floor's file")
}

// openPhase opens offset/N at random N, reads its first line as a program
// does (a 4 KiB bufio.Reader) and closes it, each timed; the baseline
// opens the plain file, seeks to that record and reads its line.
func (r *runner) openPhase(ctx context.Context, mp, plain string, p *payload, n int64) error {
	size := int64(p.size + 1)
	rng := rand.New(rand.NewPCG(r.o.Seed, uint64(p.size)+3))
	k := max(r.o.ToolRuns, 200)
	mres := Result{Phase: PhaseOpen, Size: p.size, Subject: SubjectMount, Case: "open + first line", LatUnit: "open",
		What: fmt.Sprintf("open offset/N, read a line (4 KiB bufio), close; %d random N", k)}
	pres := Result{Phase: PhaseOpen, Size: p.size, Subject: SubjectPlain, Case: "open + first line", LatUnit: "open",
		What: "open plain.txt, seek to record N, read a line, close"}
	lat := [2][]int64{}
	var want []byte
	for range k {
		if err := ctx.Err(); err != nil {
			return err
		}
		off := rng.Int64N(n)
		want = p.appendLine(want[:0], off)
		for i, res := range []*Result{&mres, &pres} {
			t := time.Now()
			var line []byte
			var err error
			if i == 0 {
				line, err = firstLine(filepath.Join(mp, topic, "0", "offset", strconv.FormatInt(off, 10)), -1)
			} else {
				line, err = firstLine(plain, off*size)
			}
			lat[i] = append(lat[i], int64(time.Since(t)))
			if err != nil {
				return err
			}
			if !bytes.Equal(line, want) {
				res.wrong(fmt.Errorf("first line of record %d: %.40q, want %.40q", off, line, want))
			}
			res.Verified++
		}
	}
	for i, res := range []*Result{&mres, &pres} {
		res.Ops = int64(len(lat[i]))
		res.P50, res.P99 = Percentiles(lat[i])
		for _, d := range lat[i] {
			res.Elapsed += time.Duration(d)
		}
		r.add(*res)
	}
	return nil
}

// firstLine opens file, seeks to at (unless at < 0), reads one line
// through a 4 KiB bufio.Reader and closes the file.
func firstLine(file string, at int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if at >= 0 {
		if _, err := f.Seek(at, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return bufio.NewReaderSize(f, 4096).ReadBytes('\n')
}

// concurrentPhase runs four readers at once, each on a quarter of the
// records: dd bs=1M of offset/(k*n/4) for n/4 records' bytes on the
// mount, the same byte ranges of plain.txt for the baseline. Cases: one
// reader alone (its first read), four first reads, four second reads.
func (r *runner) concurrentPhase(ctx context.Context, work, mp, plain string, p *payload, n int64) (err error) {
	const readers = 4
	size := int64(p.size + 1)
	quarter := n / readers
	if quarter == 0 {
		return nil
	}
	bytesEach := quarter * size
	// The floor: four readers of a go-fuse file of the plain file's
	// bytes, served from memory, to say how far FUSE itself scales on
	// this machine.
	fl, err := r.startFloorFrom(ctx, filepath.Join(work, "concurrent-floor"), plain)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fl.stop()) }()
	floorData := filepath.Join(fl.mp, "data")
	files := make([]string, readers)
	for k := range files {
		files[k] = filepath.Join(mp, topic, "0", "offset", strconv.FormatInt(int64(k)*quarter, 10))
	}
	ddMount := func(k int) []string {
		return []string{"if=" + files[k], "of=/dev/null", "bs=1M", "iflag=count_bytes", fmt.Sprintf("count=%d", bytesEach)}
	}
	ddAt := func(file string) func(k int) []string {
		return func(k int) []string {
			return []string{"if=" + file, "of=/dev/null", "bs=1M", "iflag=skip_bytes,count_bytes",
				fmt.Sprintf("skip=%d", int64(k)*bytesEach), fmt.Sprintf("count=%d", bytesEach)}
		}
	}
	together := func(k int, args func(int) []string) (time.Duration, error) {
		var wg sync.WaitGroup
		errs := make([]error, k)
		t := time.Now()
		for i := range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out bytes.Buffer
				_, errs[i] = runTool(ctx, &out, "dd", args(i)...)
			}()
		}
		wg.Wait()
		return time.Since(t), errors.Join(errs...)
	}
	mk := func(subj, c, pass string, k int) Result {
		what := fmt.Sprintf("%d x dd bs=1M of a quarter each, at once", k)
		if k == 1 {
			what = "dd bs=1M of a quarter, alone"
		}
		if pass != "" {
			what += " (" + pass + " read)"
		}
		return Result{Phase: PhaseConcurrent, Size: p.size, Subject: subj, Case: c, Pass: pass, What: what, LatUnit: "run",
			Records: int64(k) * quarter, Bytes: int64(k) * bytesEach}
	}
	res := []Result{
		mk(SubjectMount, "one reader", PassFirst, 1),
		mk(SubjectMount, "four readers", PassFirst, readers),
		mk(SubjectMount, "four readers", PassSecond, readers),
		mk(SubjectPlain, "one reader", "", 1),
		mk(SubjectPlain, "four readers", "", readers),
		mk(SubjectFloor, "one reader", PassFirst, 1),
		mk(SubjectFloor, "four readers", PassFirst, readers),
		mk(SubjectFloor, "four readers", PassSecond, readers),
	}
	lat := make([][]int64, len(res))
	for range max(r.o.Count, 3) {
		for i := range res {
			k := int(res[i].Records / quarter)
			args, drop := ddMount, files[:k]
			switch res[i].Subject {
			case SubjectPlain:
				args = ddAt(plain)
			case SubjectFloor:
				args, drop = ddAt(floorData), []string{floorData}
			}
			if res[i].Pass == PassFirst {
				for _, f := range drop {
					if err := dropCache(f); err != nil {
						return err
					}
				}
			}
			d, err := together(k, args)
			if err != nil {
				return err
			}
			lat[i] = append(lat[i], int64(d))
		}
	}
	for i := range res {
		medianRun(&res[i], lat[i])
		r.add(res[i])
	}
	return nil
}

// writePhase times one-line appends: write(2) of one record's line at a
// time to the append file of a new topic of the mount, to the floor's
// write sink (a go-fuse server that does nothing per write, mounted as
// logfs mounts) and to a plain file, interleaved in rounds; then checks
// what the mount appended.
func (r *runner) writePhase(ctx context.Context, work, mp string, p *payload) error {
	floorMp := filepath.Join(work, "floor")
	fl, err := r.startFloor(ctx, floorMp, 0)
	if err != nil {
		return err
	}
	defer fl.stop()
	appendTopic := fmt.Sprintf("lines-%d", p.size)
	if err := os.Mkdir(filepath.Join(mp, appendTopic), 0o755); err != nil {
		return fmt.Errorf("create topic through the mount: %w", err)
	}
	files := []string{filepath.Join(mp, appendTopic, "0", "append"), filepath.Join(floorMp, "append"), filepath.Join(work, "lines.txt")}
	subjects := []string{SubjectMount, SubjectFloor, SubjectPlain}
	what := []string{"write(2) of one line to TOPIC/0/append", "write(2) of one line to the floor's sink", "write(2) of one line to a plain file"}
	fds := make([]*os.File, len(files))
	for i, f := range files {
		if fds[i], err = os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
			return err
		}
		defer fds[i].Close()
	}
	const rounds, perRound = 20, 500
	lat := make([][]int64, len(files))
	var line []byte
	next := int64(0)
	for range rounds {
		for i, f := range fds {
			for j := range perRound {
				if err := ctx.Err(); err != nil {
					return err
				}
				line = p.appendLine(line[:0], next+int64(j))
				t := time.Now()
				if _, err := f.Write(line); err != nil {
					return fmt.Errorf("write %s: %w", files[i], err)
				}
				lat[i] = append(lat[i], int64(time.Since(t)))
			}
		}
		next += perRound
	}
	mres := Result{}
	for i := range files {
		res := Result{Phase: PhaseWrite, Size: p.size, Subject: subjects[i], Case: "one line per write", What: what[i], LatUnit: "write",
			Ops: int64(len(lat[i])), Records: int64(len(lat[i])), Bytes: int64(len(lat[i])) * int64(p.size+1)}
		for _, d := range lat[i] {
			res.Elapsed += time.Duration(d)
		}
		res.P50, res.P99 = Percentiles(lat[i])
		if i == 0 {
			mres = res
			continue
		}
		r.add(res)
	}
	check := newExpectWriter(p, 0, next)
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
	mres.Verified = next
	r.add(mres)
	return nil
}
