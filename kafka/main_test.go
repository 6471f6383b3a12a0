package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// helperEnv makes the test binary, run again by a test, play a process of
// its own instead of running the tests: a mount that a test can kill.
const helperEnv = "LOGFS_KAFKA_TEST_HELPER"

// helperMount mounts the cluster at brokers (args[0]) with its copy in
// args[1] on args[2], says "mounted" on stdout, and serves until SIGTERM
// (then it unmounts and closes the copy cleanly) or SIGKILL.
func helperMount(args []string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kc, err := kafka.Open(ctx, kafka.Options{Brokers: strings.Split(args[0], ","), Dir: args[1], Logger: logger})
	if err != nil {
		return err
	}
	srv, err := fs.Mount(args[2], kc.Log(), fs.Options{Cluster: kc, Logger: logger})
	if err != nil {
		kc.Close()
		return err
	}
	fmt.Println("mounted")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	for srv.Unmount() != nil {
		time.Sleep(50 * time.Millisecond)
	}
	return kc.Close()
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "mount" {
		if err := helperMount(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "helper mount:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
