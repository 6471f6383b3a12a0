package kafka

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/logfs/logfs/record"
)

// Properties are Kafka client properties, by Kafka's names: what
// --command-config FILE holds and -X name=value sets.
type Properties map[string]string

// ParseProperties reads a Java properties file as Kafka's tools take one
// (--command-config): "name=value" or "name: value" lines, '#' and '!'
// comments, a trailing backslash continuing a line.
func ParseProperties(data []byte) (Properties, error) {
	props := Properties{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var pending string
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line, pending = pending+line, ""
		if err := props.SetPair(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if pending != "" {
		if err := props.SetPair(pending); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	return props, sc.Err()
}

// maxPropertiesFile is the largest properties file read: a client
// configuration is a few kilobytes, and a path such as /dev/zero must not
// be read for ever.
const maxPropertiesFile = 1 << 20

// ReadProperties reads a properties file (see ParseProperties).
func ReadProperties(path string) (Properties, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPropertiesFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxPropertiesFile {
		return nil, fmt.Errorf("%w: %s: more than %d bytes; not a properties file", ErrConfig, path, maxPropertiesFile)
	}
	p, err := ParseProperties(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// SetPair sets one "name=value" (or "name: value") property, as -X takes it.
func (p Properties) SetPair(s string) error {
	i := strings.IndexAny(s, "=:")
	if i <= 0 {
		return fmt.Errorf("%w: %q is not name=value", ErrConfig, s)
	}
	name := strings.TrimSpace(s[:i])
	if name == "" {
		return fmt.Errorf("%w: %q is not name=value", ErrConfig, s)
	}
	p[name] = strings.TrimSpace(s[i+1:])
	return nil
}

// IsolationLevel says which records of transactions a copy shows.
type IsolationLevel int8

// The isolation levels, as Kafka numbers them in fetch requests.
const (
	// ReadUncommitted shows every record, those of open and aborted
	// transactions too.
	ReadUncommitted IsolationLevel = 0
	// ReadCommitted shows records of committed transactions only, up to
	// the last stable offset: Kafka's consumers' and kcat's default.
	ReadCommitted IsolationLevel = 1
)

// ParseIsolationLevel reads Kafka's names: read_committed, read_uncommitted.
func ParseIsolationLevel(s string) (IsolationLevel, error) {
	switch strings.ToLower(s) {
	case "read_committed":
		return ReadCommitted, nil
	case "read_uncommitted":
		return ReadUncommitted, nil
	}
	return 0, fmt.Errorf("%w: isolation.level %q: want read_committed or read_uncommitted", ErrConfig, s)
}

func (l IsolationLevel) String() string {
	if l == ReadUncommitted {
		return "read_uncommitted"
	}
	return "read_committed"
}

// settings are the client properties logfs acts on, parsed.
type settings struct {
	brokers          []string
	opts             []kgo.Opt
	isolation        IsolationLevel
	compression      record.Compression
	deliveryTimeout  time.Duration // delivery.timeout.ms: an append that is not acknowledged by then fails
	requestTimeout   time.Duration // request.timeout.ms: one request
	apiTimeout       time.Duration // default.api.timeout.ms: a wait for metadata, offsets or the copy
	retryBackoff     time.Duration
	fetchMaxBytes    int32
	partitionMax     int32
	fetchMaxWait     time.Duration
	metadataInterval time.Duration // metadata.max.age.ms, capped: how stale the listing may be
	ignored          []string
}

// known lists the client properties that are taken, and those accepted
// and ignored because logfs does what they ask for anyway (acks=all with
// idempotence) or they only tune a client logfs does not use.
var known = map[string]bool{
	"bootstrap.servers": true, "client.id": true, "security.protocol": true,
	"sasl.mechanism": true, "sasl.jaas.config": true, "sasl.username": true, "sasl.password": true,
	"ssl.truststore.type": true, "ssl.truststore.location": true, "ssl.truststore.certificates": true, "ssl.ca.location": true,
	"ssl.keystore.type": true, "ssl.keystore.location": true, "ssl.keystore.certificate.chain": true, "ssl.keystore.key": true,
	"ssl.certificate.location": true, "ssl.key.location": true, "ssl.key.password": true, "ssl.keystore.password": true,
	"ssl.truststore.password": true, "ssl.endpoint.identification.algorithm": true,
	"isolation.level": true, "compression.type": true, "delivery.timeout.ms": true, "request.timeout.ms": true,
	"default.api.timeout.ms": true, "retry.backoff.ms": true, "fetch.max.bytes": true, "max.partition.fetch.bytes": true,
	"fetch.max.wait.ms": true, "metadata.max.age.ms": true, "acks": true, "enable.idempotence": true,
}

// parse turns properties into client options. brokers from the command
// line win over bootstrap.servers.
func (p Properties) parse(brokers []string) (*settings, error) {
	s := &settings{
		isolation:       ReadCommitted,
		deliveryTimeout: 120 * time.Second,
		requestTimeout:  30 * time.Second,
		apiTimeout:      60 * time.Second,
		retryBackoff:    100 * time.Millisecond,
		fetchMaxBytes:   64 << 20,
		// Kafka's own default for consumers and followers
		// (max.partition.fetch.bytes, replica.fetch.max.bytes). Larger
		// answers copied a partition 3 to 4 times slower from kfake on a
		// loaded 2-core machine (16 MiB: 27-47 MB/s, 1 MiB: 92-212 MB/s,
		// 256 MiB of 1 KiB records); a batch larger than this still comes
		// whole (KIP-74).
		partitionMax:     1 << 20,
		fetchMaxWait:     500 * time.Millisecond,
		metadataInterval: 2 * time.Second,
	}
	for _, b := range brokers {
		for _, h := range strings.Split(b, ",") {
			if h = strings.TrimSpace(h); h != "" {
				s.brokers = append(s.brokers, h)
			}
		}
	}
	if len(s.brokers) == 0 {
		for _, h := range strings.Split(p["bootstrap.servers"], ",") {
			if h = strings.TrimSpace(h); h != "" {
				s.brokers = append(s.brokers, h)
			}
		}
	}
	if len(s.brokers) == 0 {
		return nil, fmt.Errorf("%w: no bootstrap servers (--bootstrap-server HOST:PORT)", ErrConfig)
	}
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] {
			s.ignored = append(s.ignored, k)
		}
	}
	var err error
	ms := func(name string, dst *time.Duration) {
		v, ok := p[name]
		if !ok || err != nil {
			return
		}
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil || n <= 0 || n > math.MaxInt32 {
			// Kafka's requests carry milliseconds as an int32.
			err = fmt.Errorf("%w: %s=%s: want a positive number of milliseconds, at most %d", ErrConfig, name, v, math.MaxInt32)
			return
		}
		*dst = time.Duration(n) * time.Millisecond
	}
	ms("delivery.timeout.ms", &s.deliveryTimeout)
	ms("request.timeout.ms", &s.requestTimeout)
	ms("default.api.timeout.ms", &s.apiTimeout)
	ms("retry.backoff.ms", &s.retryBackoff)
	ms("fetch.max.wait.ms", &s.fetchMaxWait)
	ms("metadata.max.age.ms", &s.metadataInterval)
	s.metadataInterval = min(s.metadataInterval, 5*time.Second)
	bytesProp := func(name string, dst *int32) {
		v, ok := p[name]
		if !ok || err != nil {
			return
		}
		n, e := strconv.ParseInt(v, 10, 32)
		if e != nil || n < 1024 {
			err = fmt.Errorf("%w: %s=%s: want a number of bytes, at least 1024", ErrConfig, name, v)
			return
		}
		*dst = int32(n)
	}
	bytesProp("fetch.max.bytes", &s.fetchMaxBytes)
	bytesProp("max.partition.fetch.bytes", &s.partitionMax)
	if err != nil {
		return nil, err
	}
	if v, ok := p["isolation.level"]; ok {
		if s.isolation, err = ParseIsolationLevel(v); err != nil {
			return nil, err
		}
	}
	if v, ok := p["compression.type"]; ok {
		if s.compression, err = parseCompression(v); err != nil {
			return nil, err
		}
	}
	if v, ok := p["acks"]; ok && v != "all" && v != "-1" {
		return nil, fmt.Errorf("%w: acks=%s: appends always wait for every in-sync replica (acks=all)", ErrConfig, v)
	}
	if v, ok := p["enable.idempotence"]; ok && v != "true" {
		return nil, fmt.Errorf("%w: enable.idempotence=%s: appends are always idempotent, so a retry never duplicates", ErrConfig, v)
	}
	if s.deliveryTimeout < s.requestTimeout {
		return nil, fmt.Errorf("%w: delivery.timeout.ms (%d) must be at least request.timeout.ms (%d)", ErrConfig, s.deliveryTimeout.Milliseconds(), s.requestTimeout.Milliseconds())
	}

	s.opts = []kgo.Opt{
		kgo.SeedBrokers(s.brokers...),
		kgo.ClientID(orDefault(p["client.id"], "logfs")),
		kgo.RetryTimeout(s.apiTimeout),
		kgo.RequestTimeoutOverhead(s.requestTimeout),
		kgo.MetadataMinAge(min(s.metadataInterval, time.Second)),
		kgo.MetadataMaxAge(s.metadataInterval),
	}
	proto := strings.ToUpper(orDefault(p["security.protocol"], "PLAINTEXT"))
	var useTLS, useSASL bool
	switch proto {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("%w: security.protocol=%s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", ErrConfig, p["security.protocol"])
	}
	if useTLS {
		tc, err := p.tlsConfig()
		if err != nil {
			return nil, err
		}
		s.opts = append(s.opts, kgo.DialTLSConfig(tc))
	} else if p.anySet("ssl.truststore.location", "ssl.ca.location", "ssl.keystore.location", "ssl.certificate.location") {
		return nil, fmt.Errorf("%w: ssl.* properties given but security.protocol is %s (want SSL or SASL_SSL)", ErrConfig, proto)
	}
	if useSASL {
		m, err := p.saslMechanism()
		if err != nil {
			return nil, err
		}
		s.opts = append(s.opts, kgo.SASL(m))
	} else if p.anySet("sasl.mechanism", "sasl.jaas.config", "sasl.username") {
		return nil, fmt.Errorf("%w: sasl.* properties given but security.protocol is %s (want SASL_PLAINTEXT or SASL_SSL)", ErrConfig, proto)
	}
	return s, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (p Properties) anySet(names ...string) bool {
	for _, n := range names {
		if p[n] != "" {
			return true
		}
	}
	return false
}

func parseCompression(v string) (record.Compression, error) {
	switch strings.ToLower(v) {
	case "none", "uncompressed", "":
		return record.None, nil
	case "gzip":
		return record.Gzip, nil
	case "snappy":
		return record.Snappy, nil
	case "lz4":
		return record.LZ4, nil
	case "zstd":
		return record.Zstd, nil
	}
	return 0, fmt.Errorf("%w: compression.type=%s: want none, gzip, snappy, lz4 or zstd", ErrConfig, v)
}

// jaasOption matches one option of a JAAS login module line:
// username="alice" or password='s3cret'.
var jaasOption = regexp.MustCompile(`([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([^\s;]+))`)

// credentials returns the SASL user and password: sasl.username and
// sasl.password (librdkafka's names), or the username and password of
// sasl.jaas.config (the Java clients').
func (p Properties) credentials() (user, pass string, err error) {
	user, pass = p["sasl.username"], p["sasl.password"]
	if jaas := p["sasl.jaas.config"]; jaas != "" {
		for _, m := range jaasOption.FindAllStringSubmatch(jaas, -1) {
			v := m[2] + m[3] + m[4]
			v = strings.NewReplacer(`\"`, `"`, `\'`, `'`, `\\`, `\`).Replace(v)
			switch m[1] {
			case "username":
				user = v
			case "password":
				pass = v
			}
		}
	}
	if user == "" {
		return "", "", fmt.Errorf("%w: SASL needs a user: sasl.jaas.config with username=\"…\" password=\"…\", or sasl.username and sasl.password", ErrConfig)
	}
	return user, pass, nil
}

func (p Properties) saslMechanism() (sasl.Mechanism, error) {
	user, pass, err := p.credentials()
	if err != nil {
		return nil, err
	}
	switch mech := strings.ToUpper(orDefault(p["sasl.mechanism"], "GSSAPI")); mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	default:
		return nil, fmt.Errorf("%w: sasl.mechanism=%s: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", ErrConfig, mech)
	}
}

// tlsConfig builds the TLS settings from PEM files or inline PEM: the CA
// (ssl.truststore.location with ssl.truststore.type=PEM, or
// ssl.ca.location), a client certificate and key (ssl.keystore.location of
// type PEM holding both, ssl.keystore.certificate.chain and
// ssl.keystore.key inline, or ssl.certificate.location and
// ssl.key.location). Java keystores (JKS, PKCS12) are refused with a hint.
func (p Properties) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	for _, name := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if v := p[name]; v != "" && !strings.EqualFold(v, "PEM") {
			return nil, fmt.Errorf("%w: %s=%s: only PEM files are read (convert with keytool -exportcert -rfc, or openssl pkcs12 -nodes)", ErrConfig, name, v)
		}
	}
	if p["ssl.key.password"] != "" {
		return nil, fmt.Errorf("%w: ssl.key.password: encrypted private keys are not read; decrypt the key (openssl pkey -in KEY -out PLAIN)", ErrConfig)
	}
	var caPEM []byte
	switch {
	case p["ssl.truststore.certificates"] != "":
		caPEM = []byte(p["ssl.truststore.certificates"])
	case p["ssl.truststore.location"] != "" || p["ssl.ca.location"] != "":
		path := orDefault(p["ssl.truststore.location"], p["ssl.ca.location"])
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: CA file: %v", ErrConfig, err)
		}
		caPEM = b
	}
	if caPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("%w: no PEM certificate in the CA file", ErrConfig)
		}
		tc.RootCAs = pool
	}
	var certPEM, keyPEM []byte
	switch {
	case p["ssl.keystore.certificate.chain"] != "" || p["ssl.keystore.key"] != "":
		certPEM, keyPEM = []byte(p["ssl.keystore.certificate.chain"]), []byte(p["ssl.keystore.key"])
	case p["ssl.keystore.location"] != "":
		b, err := os.ReadFile(p["ssl.keystore.location"])
		if err != nil {
			return nil, fmt.Errorf("%w: keystore: %v", ErrConfig, err)
		}
		certPEM, keyPEM = b, b
	case p["ssl.certificate.location"] != "" || p["ssl.key.location"] != "":
		c, err := os.ReadFile(p["ssl.certificate.location"])
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %v", ErrConfig, err)
		}
		k, err := os.ReadFile(p["ssl.key.location"])
		if err != nil {
			return nil, fmt.Errorf("%w: client key: %v", ErrConfig, err)
		}
		certPEM, keyPEM = c, k
	}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate and key: %v", ErrConfig, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if v, ok := p["ssl.endpoint.identification.algorithm"]; ok && v == "" {
		// Kafka's way of turning host name checks off; the chain is still
		// checked against the CA.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			opts := x509.VerifyOptions{Roots: tc.RootCAs, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return tc, nil
}
