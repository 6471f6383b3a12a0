// Command kfakeserve serves an in-memory fake Kafka cluster (franz-go's
// kfake) on 127.0.0.1 until Ctrl-C, for trying logfs's cluster mount, and
// real clients such as kcat, by hand:
//
//	go run ./internal/kfakeserve -topic orders:3 &
//	logfs mount --bootstrap-server 127.0.0.1:9092 /tmp/kafka
//	kcat -b 127.0.0.1:9092 -L
//
// Everything lives in memory and is gone when it stops. It listens on
// 127.0.0.1 only.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	var (
		port    = flag.Int("port", 9092, "port of the first broker (the others take the next ones); 0 picks free ports")
		brokers = flag.Int("brokers", 1, "number of brokers")
		sasl    = flag.String("sasl", "", "require SASL: `MECHANISM:USER:PASSWORD` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		topics  topicList
	)
	flag.Var(&topics, "topic", "a topic to create, `NAME[:PARTITIONS]` (repeatable)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "kfakeserve: unexpected argument %q (see -help)\n", flag.Arg(0))
		os.Exit(2)
	}
	opts := []kfake.Opt{kfake.NumBrokers(*brokers), kfake.AllowAutoTopicCreation()}
	if *port != 0 {
		ports := make([]int, *brokers)
		for i := range ports {
			ports[i] = *port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	for _, t := range topics {
		opts = append(opts, kfake.SeedTopics(t.partitions, t.name))
	}
	if *sasl != "" {
		parts := strings.SplitN(*sasl, ":", 3)
		if len(parts) != 3 {
			fmt.Fprintln(os.Stderr, "kfakeserve: -sasl wants MECHANISM:USER:PASSWORD")
			os.Exit(2)
		}
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(strings.ToUpper(parts[0]), parts[1], parts[2]))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfakeserve: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "kfakeserve: a fake Kafka cluster of %d broker(s) at %s; Ctrl-C stops it (and forgets everything)\n",
		*brokers, strings.Join(c.ListenAddrs(), ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	c.Close()
}

type topic struct {
	name       string
	partitions int32
}

type topicList []topic

func (l *topicList) String() string { return fmt.Sprint(*l) }

func (l *topicList) Set(s string) error {
	name, n, ok := strings.Cut(s, ":")
	t := topic{name: name, partitions: 1}
	if ok {
		p, err := strconv.Atoi(n)
		if err != nil || p < 1 {
			return fmt.Errorf("partitions %q: want a number of at least 1", n)
		}
		t.partitions = int32(p)
	}
	if name == "" {
		return fmt.Errorf("want NAME[:PARTITIONS]")
	}
	*l = append(*l, t)
	return nil
}
