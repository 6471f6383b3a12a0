package fs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/record"
	"github.com/logfs/logfs/storage"
)

// TestAdv32JSONLRoundTrip: README: "Keys, headers and timestamps can be
// written too, as JSON lines in the shape .jsonl files print, so a dump
// appends back unchanged." A .jsonl file of odd records, appended to
// another topic's append.jsonl, reads back byte for byte.
func TestAdv32JSONLRoundTrip(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	odd := [][]byte{
		nil, {}, []byte("plain"), []byte("\x00\x01\x1f\x7f"), []byte("\xff"), []byte("\xc0\x80"),
		[]byte("\xed\xa0\x80"), []byte("a\u2028b\u2029c"), []byte("<>&'\"\\/"), []byte("😀"),
		[]byte("\xf4\x90\x80\x80"), []byte("tab\there\r\nnl"), []byte("\ufeffbom"), []byte("\U0010ffff"),
	}
	var recs []storage.Record
	for i, v := range odd {
		k := odd[(i+3)%len(odd)]
		r := storage.Record{Timestamp: 1700000000000 + int64(i), Key: k, Value: v}
		switch i % 3 {
		case 1:
			r.Headers = []record.Header{{Key: []byte("h"), Value: v}, {Key: []byte("h"), Value: nil}}
		case 2:
			hk := k
			if hk == nil {
				hk = []byte{} // a header key is never null (Kafka's rule)
			}
			r.Headers = []record.Header{{Key: hk, Value: []byte("x")}, {Key: []byte(""), Value: []byte{}}}
		}
		recs = append(recs, r)
	}
	_, err := p.Append(recs)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(mp, "u"), 0o755))
	src := filepath.Join(mp, "t", "0", "offset", "0.jsonl")
	out, err := exec.Command("bash", "-c", fmt.Sprintf("cat '%s' >> '%s'", src, filepath.Join(mp, "u", "0", "append.jsonl"))).CombinedOutput()
	require.NoError(t, err, string(out))
	a, err := os.ReadFile(src)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(mp, "u", "0", "offset", "0.jsonl"))
	require.NoError(t, err)
	require.Equal(t, string(a), string(b))
	a, err = os.ReadFile(filepath.Join(mp, "t", "0", "offset", "0"))
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(mp, "u", "0", "offset", "0"))
	require.NoError(t, err)
	require.Equal(t, a, b, "values")
}
