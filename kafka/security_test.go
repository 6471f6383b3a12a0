package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/kafka"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	caFile, serverCert, serverKey, clientCert, clientKey, clientBoth string
	pool                                                             *x509.CertPool
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "logfs test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	write := func(name string, blocks ...*pem.Block) string {
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage, ip bool) (*pem.Block, *pem.Block) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "logfs test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature}
		if ip {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		require.NoError(t, err)
		kd, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return &pem.Block{Type: "CERTIFICATE", Bytes: der}, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}
	}
	pk := &testPKI{pool: x509.NewCertPool()}
	pk.pool.AddCert(ca)
	pk.caFile = write("ca.pem", &pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	sc, sk := leaf(2, x509.ExtKeyUsageServerAuth, true)
	pk.serverCert, pk.serverKey = write("server.pem", sc), write("server.key", sk)
	cc, ck := leaf(3, x509.ExtKeyUsageClientAuth, false)
	pk.clientCert, pk.clientKey = write("client.pem", cc), write("client.key", ck)
	pk.clientBoth = write("client-keystore.pem", ck, cc)
	return pk
}

func (pk *testPKI) serverTLS(t testing.TB, requireClient bool) *tls.Config {
	cert, err := tls.LoadX509KeyPair(pk.serverCert, pk.serverKey)
	require.NoError(t, err)
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if requireClient {
		tc.ClientAuth, tc.ClientCAs = tls.RequireAndVerifyClientCert, pk.pool
	}
	return tc
}

func openCluster(t testing.TB, c *kfake.Cluster, props kafka.Properties) (*kafka.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	props["request.timeout.ms"], props["default.api.timeout.ms"] = "2000", "4000"
	kc, err := kafka.Open(ctx, kafka.Options{Brokers: c.ListenAddrs(), Properties: props, Dir: t.TempDir(), Logger: testLogger(t)})
	if err == nil {
		t.Cleanup(func() { kc.Close() })
	}
	return kc, err
}

// A cluster that requires TLS and SASL is mounted with the client
// properties Kafka's tools take: SASL_SSL with SCRAM or PLAIN and a PEM
// truststore; wrong credentials or no TLS fail with a clear error.
func TestMountTLSAndSASL(t *testing.T) {
	pk := newPKI(t)
	c := fakeCluster(t, kfake.TLS(pk.serverTLS(t, false)), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "alice", "s3cret"), kfake.Superuser("PLAIN", "bob", "pa55"),
		kfake.SeedTopics(1, "secure"))
	cl := client(t, c, kgo.DialTLSConfig(&tls.Config{RootCAs: pk.pool}),
		kgo.SASL(scram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism()))
	produce(t, cl, "secure", 0, "hush")

	scramProps := kafka.Properties{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
		"sasl.jaas.config":    `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";`,
		"ssl.truststore.type": "PEM", "ssl.truststore.location": pk.caFile}
	_, mp := mounted(t, c, kafka.Options{Properties: scramProps}, fs.Options{})
	require.Equal(t, "hush\n", readFile(t, filepath.Join(mp, "secure/0/offset/0")))
	_, err := appendTo(filepath.Join(mp, "secure/0/append"), []byte("told\n"))
	require.NoError(t, err)
	require.Equal(t, "hush\ntold\n", readFile(t, filepath.Join(mp, "secure/0/offset/0")))

	// The same from a properties file, with PLAIN and librdkafka's names.
	cfg := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(cfg, []byte("# as for kafka-console-consumer --consumer.config\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"+
		"sasl.username=bob\nsasl.password=pa55\nssl.ca.location="+pk.caFile+"\n"), 0o600))
	props, err := kafka.ReadProperties(cfg)
	require.NoError(t, err)
	kc, err := openCluster(t, c, props)
	require.NoError(t, err)
	n, err := kc.Partitions(context.Background(), "secure")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	bad := kafka.Properties{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
		"sasl.jaas.config": `x required username="alice" password="wrong";`, "ssl.truststore.location": pk.caFile}
	_, err = openCluster(t, c, bad)
	require.Error(t, err)
	_, err = openCluster(t, c, kafka.Properties{"security.protocol": "SSL", "ssl.truststore.location": pk.caFile})
	require.Error(t, err, "TLS without SASL is refused by this cluster")
	_, err = openCluster(t, c, kafka.Properties{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
		"sasl.username": "bob", "sasl.password": "pa55"})
	require.Error(t, err, "a server certificate not signed by a trusted CA")
}

// Mutual TLS: the client certificate comes from a PEM keystore, or from
// librdkafka's certificate and key files.
func TestMountClientCertificate(t *testing.T) {
	pk := newPKI(t)
	c := fakeCluster(t, kfake.TLS(pk.serverTLS(t, true)), kfake.SeedTopics(1, "mtls"))
	for name, props := range map[string]kafka.Properties{
		"keystore": {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pk.caFile,
			"ssl.keystore.type": "PEM", "ssl.keystore.location": pk.clientBoth},
		"files": {"security.protocol": "SSL", "ssl.ca.location": pk.caFile, "ssl.certificate.location": pk.clientCert,
			"ssl.key.location": pk.clientKey},
	} {
		t.Run(name, func(t *testing.T) {
			kc, err := openCluster(t, c, props)
			require.NoError(t, err)
			_, err = kc.Partitions(context.Background(), "mtls")
			require.NoError(t, err)
		})
	}
	_, err := openCluster(t, c, kafka.Properties{"security.protocol": "SSL", "ssl.truststore.location": pk.caFile})
	require.Error(t, err, "no client certificate")
}

func TestPropertiesParse(t *testing.T) {
	p, err := kafka.ParseProperties([]byte("# comment\n! another\nsecurity.protocol = SASL_SSL\nsasl.jaas.config=a \\\n  required username=\"u\" password=\"p\";\nkey: value\n\n"))
	require.NoError(t, err)
	require.Equal(t, kafka.Properties{"security.protocol": "SASL_SSL", "sasl.jaas.config": `a required username="u" password="p";`, "key": "value"}, p)
	_, err = kafka.ParseProperties([]byte("novalue\n"))
	require.ErrorIs(t, err, kafka.ErrConfig)
	for _, bad := range []kafka.Properties{
		{"security.protocol": "KERBEROS"},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "u"},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
		{"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": "x.jks"},
		{"sasl.mechanism": "PLAIN"},
		{"acks": "1"},
		{"compression.type": "brotli"},
		{"isolation.level": "dirty"},
		{"delivery.timeout.ms": "-5"},
	} {
		_, err := kafka.Open(context.Background(), kafka.Options{Brokers: []string{"127.0.0.1:1"}, Properties: bad, Dir: t.TempDir()})
		require.ErrorIs(t, err, kafka.ErrConfig, "%v", bad)
	}
	_, err = kafka.Open(context.Background(), kafka.Options{Dir: t.TempDir()})
	require.ErrorIs(t, err, kafka.ErrConfig, "no bootstrap servers")
}

// A principal the cluster does not authorize gets EPERM, with the
// broker's refusal logged: mkdir of a topic, and an append to a topic it
// may only read.
func TestMountAuthorization(t *testing.T) {
	readTopics := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Operation: kmsg.ACLOperationRead, Allow: true}
	describe := readTopics
	describe.Operation = kmsg.ACLOperationDescribe
	describeConfigs := readTopics
	describeConfigs.Operation = kmsg.ACLOperationDescribeConfigs
	c := fakeCluster(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "reader", "pw", readTopics, describe, describeConfigs), kfake.SeedTopics(1, "ro"))
	props := kafka.Properties{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "reader", "sasl.password": "pw",
		"delivery.timeout.ms": "5000", "request.timeout.ms": "2000"}
	_, mp := mounted(t, c, kafka.Options{Properties: props}, fs.Options{})
	require.ErrorIs(t, os.Mkdir(filepath.Join(mp, "new"), 0o755), syscall.EPERM)
	_, err := appendTo(filepath.Join(mp, "ro/0/append"), []byte("no\n"))
	require.ErrorIs(t, err, syscall.EPERM)
	require.Equal(t, "", readFile(t, filepath.Join(mp, "ro/0/offset/0")))
}
