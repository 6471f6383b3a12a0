package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/internal/fusetest"
)

// TestMountOptionsPeopleType: the words fstab lines and habit put in -o
// are taken; an unknown one is refused with the list of what -o takes, and
// a range error names -1 where -1 is allowed.
func TestMountOptionsPeopleType(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ opt, want string }{
		"unknown word": {"noatime,bogus", "-o bogus: not an option logfs knows; -o takes ro, rw, allow_other"},
		"lists topics": {"bogus", "retention.ms=, segment.bytes="},
		"sync":         {"sync", "-o sync: logfs does not make every write synchronous; -o flush.messages=1"},
		"minus one":    {"retention.ms=-5", "retention.ms=-5 is outside [0, 9223372036854775807], and not -1 (which turns it off)"},
		"no minus one": {"segment.bytes=-1", "segment.bytes=-1 is outside [14, 2147483647]"},
	} {
		t.Run(name, func(t *testing.T) {
			r := fails(t, dir, exitUsage, tc.want, "mount", "-o", tc.opt, filepath.Join(dir, "mnt"))
			if name == "no minus one" {
				require.NotContains(t, r.stderr, "not -1")
			}
		})
	}
	require.NoDirExists(t, filepath.Join(dir, "logfs-data"))

	mp := filepath.Join(dir, "mnt")
	m := startMount(t, dir, mp, "-o", "rw,noatime,nodev,nosuid,noexec,relatime,defaults,_netdev,nofail,x-systemd.automount,default_permissions")
	require.Contains(t, m.stderr(), "(read-write)")
	require.NoError(t, os.Mkdir(filepath.Join(mp, "t"), 0o755))
	appendLine(t, filepath.Join(mp, "t", "0", "append"), "x\n")
}

// TestDumpMissingFile: dump of a missing file says so before it prints
// anything about the files before it.
func TestDumpMissingFile(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	ok(t, dir, "a\n", "produce", "t")
	log := filepath.Join("logfs-data", "t-0", "00000000000000000000.log")
	r := fails(t, dir, exitFailure, "nosuch.log: no such file", "dump", log, "nosuch.log")
	require.Empty(t, r.stdout)
	r = fails(t, dir, exitFailure, "is a directory: name its segment files", "dump", filepath.Join("logfs-data", "t-0"))
	require.Empty(t, r.stdout)
	require.True(t, strings.HasPrefix(ok(t, dir, "", "dump", log), "Dumping "+log))
}

// TestTimeForms: consume --time and append.jsonl take a plain date and
// RFC 3339 as well as numbers.
func TestTimeForms(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "t")
	in := `{"value":"old","timestamp":"2024-10-09T23:59:59Z"}
{"value":"new","timestamp":"2024-10-10"}
{"value":"newer","timestamp":1728604800000}
`
	ok(t, dir, in, "produce", "--format", "jsonl", "t")
	require.Equal(t, "new\nnewer\n", ok(t, dir, "", "consume", "--time", "2024-10-10", "t", "0"))
	require.Equal(t, "newer\n", ok(t, dir, "", "consume", "--time", "2024-10-11T00:00:00Z", "t", "0"))
	require.Equal(t, "newer\n", ok(t, dir, "", "consume", "--time", "1728604800", "t", "0"))
	fails(t, dir, exitUsage, "want unix seconds, unix milliseconds, RFC 3339 (2024-10-10T12:00:00Z) or a date (2024-10-10)", "consume", "--time", "10/10/2024", "t", "0")
}

// TestDataOneLevelAbove: --data at the folder above a data directory (a
// broker's parent folder) says it found none there and where one is, for
// reading and writing commands alike, and writes nothing there.
func TestDataOneLevelAbove(t *testing.T) {
	dir := t.TempDir()
	ok(t, dir, "", "topic", "create", "--data", filepath.Join("kafka", "data"), "t")
	ok(t, dir, "x\n", "produce", "--data", filepath.Join("kafka", "data"), "t")
	want := "kafka is not a data directory (no checkpoints, no partition folders with segments), but " +
		filepath.Join("kafka", "data") + " is one: give --data " + filepath.Join("kafka", "data")
	for _, args := range [][]string{
		{"topic", "list", "--data", "kafka"},
		{"consume", "--data", "kafka", "--offset", "0", "t", "0"},
		{"check", "--data", "kafka"},
		{"produce", "--data", "kafka", "t"},
		{"topic", "create", "--data", "kafka", "u"},
	} {
		fails(t, dir, exitFailure, want, args...)
	}
	// mount checks FUSE before the data directory (#18.1): where this user
	// cannot mount, that is what it says, and it too creates nothing.
	mountArgs := []string{"mount", "--read-only", "--data", "kafka", filepath.Join(dir, "mnt")}
	if err := fusetest.Usable(); err != nil {
		t.Logf("FUSE is not usable here (%v): mount is refused for that first", err)
		fails(t, dir, exitFailure, "FUSE is not available", mountArgs...)
	} else {
		fails(t, dir, exitFailure, want, mountArgs...)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "kafka"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing was written beside the data directory")
	require.NoDirExists(t, filepath.Join(dir, "mnt"))
	// Two data directories below: both named.
	ok(t, dir, "", "topic", "create", "--data", filepath.Join("kafka", "data2"), "t")
	fails(t, dir, exitFailure, "but "+filepath.Join("kafka", "data")+", "+filepath.Join("kafka", "data2")+" are: give --data "+filepath.Join("kafka", "data"), "topic", "list", "--data", "kafka")
	// The data directory itself, and an empty folder, open as before.
	require.Equal(t, "t\n", ok(t, dir, "", "topic", "list", "--data", filepath.Join("kafka", "data")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	ok(t, dir, "", "topic", "create", "--data", "empty", "t")
}

// TestMountHelpNamesWhatItTakes: mount --help's usage line has the flags
// README's command line gives it, and its -o help every word -o takes
// besides the topic defaults (what a newcomer reads before README).
func TestMountHelpNamesWhatItTakes(t *testing.T) {
	out := ok(t, t.TempDir(), "", "mount", "--help")
	usage := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "logfs mount [") {
			usage = line
			break
		}
	}
	require.NotEmpty(t, usage, "a usage line in:\n%s", out)
	for _, flag := range []string{"[--read-only [--follow]]", "[--isolation-level L]", "[--allow-other]", "[-o key=value …]"} {
		require.Contains(t, usage, flag)
	}
	optHelp := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "-o, --option") {
			optHelp = line
		}
	}
	for _, word := range []string{"ro", "rw", "allow_other", "default_permissions", "debug", "direct_io", "umask=", "gid=", "log.retention.check.interval.ms=", "noatime", "nofail"} {
		require.Contains(t, optHelp, word)
	}
}

// TestConsumeHelpNamesIsolation: consume --help's usage line has
// --isolation-level, as README's command line does.
func TestConsumeHelpNamesIsolation(t *testing.T) {
	out := ok(t, t.TempDir(), "", "consume", "--help")
	i := strings.Index(out, "logfs consume [")
	require.GreaterOrEqual(t, i, 0, out)
	usage, _, _ := strings.Cut(out[i:], "\n")
	require.Contains(t, usage, "[--isolation-level L]")
}

// TestDataFlagSaysWhoCreates: the --data help of a command says "created on
// first use" only where the command creates the data directory (mount and
// topic create); the others fail on a missing one, so a newcomer who read
// "created on first use" in check --help and got "does not exist" was misled.
func TestDataFlagSaysWhoCreates(t *testing.T) {
	dir := t.TempDir()
	dataHelp := func(args ...string) string {
		out := ok(t, dir, "", append(args, "--help")...)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "--data string") {
				return line
			}
		}
		t.Fatalf("logfs %s --help: no --data line in:\n%s", strings.Join(args, " "), out)
		return ""
	}
	for _, args := range [][]string{{"check"}, {"consume"}, {"produce"}, {"topic", "list"}, {"topic", "describe"}, {"topic", "delete"}} {
		require.NotContains(t, dataHelp(args...), "created", "logfs %s --help", strings.Join(args, " "))
		cmd := append(append([]string{}, args...), "--data", "missing")
		switch args[len(args)-1] {
		case "consume":
			cmd = append(cmd, "--offset", "0", "t", "0")
		case "produce", "describe", "delete":
			cmd = append(cmd, "t")
		}
		fails(t, dir, exitFailure, "does not exist", cmd...)
		require.NoDirExists(t, filepath.Join(dir, "missing"))
	}
	require.Contains(t, dataHelp("topic", "create"), "created on first use")
	ok(t, dir, "", "topic", "create", "--data", "new", "t")
	require.DirExists(t, filepath.Join(dir, "new"))
	require.Contains(t, dataHelp("mount"), "created on first use, unless --read-only")
}

// TestConsumeTimeHelpNamesEveryForm: the --time flag's help names every form
// --time takes, the date included, as the command's long help and README do.
func TestConsumeTimeHelpNamesEveryForm(t *testing.T) {
	dir := t.TempDir()
	out := ok(t, dir, "", "consume", "--help")
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "--time T") {
			line = l
		}
	}
	for _, form := range []string{"unix seconds", "unix ms", "RFC 3339", "date"} {
		require.Contains(t, line, form)
	}
	ok(t, dir, "", "topic", "create", "t")
	ok(t, dir, "a\n", "produce", "t")
	require.Equal(t, "a\n", ok(t, dir, "", "consume", "--time", "2024-10-10", "t", "0"))
}

// TestClusterFormInHelp: README gives mount, produce and consume a second
// form, on a Kafka cluster (--bootstrap-server); their --help showed it only
// as one flag among many. Each has an example of it, and mount's long help
// says what it does and where its local copy lives.
func TestClusterFormInHelp(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []string{"mount", "produce", "consume"} {
		out := ok(t, dir, "", c, "--help")
		_, examples, found := strings.Cut(out, "Examples:")
		require.True(t, found, out)
		examples, _, _ = strings.Cut(examples, "Flags:")
		require.Contains(t, examples, "logfs "+c+" --bootstrap-server ", "logfs %s --help", c)
	}
	out := ok(t, dir, "", "mount", "--help")
	require.Contains(t, out, "With --bootstrap-server HOST:PORT[,HOST:PORT…] it mounts a live Kafka\ncluster instead")
	require.Contains(t, out, "~/.cache/logfs/cluster-<cluster id>")
}
