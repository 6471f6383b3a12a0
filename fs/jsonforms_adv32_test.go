package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAdv32JSONLValidForms: append.jsonl takes any valid JSON object of
// the documented shape: CRLF line ends, tabs and spaces around, escaped
// surrogate pairs, \u0000, headers and key in either form, a timestamp
// as a string in any form time/ takes.
func TestAdv32JSONLValidForms(t *testing.T) {
	mp, p, _, _ := adv32Mount(t, nil, Options{})
	path := filepath.Join(mp, "t", "0", "append.jsonl")
	for _, line := range []string{
		"{\"value\":\"crlf\"}\r",
		"\t {\"value\" : \"spaced\" } \t",
		`{"value":"\ud83d\ude00"}`,
		`{"value":"nul\u0000x"}`,
		`{"value":{"base64":"AP8="}}`,
		`{"key":{"base64":""},"value":"k"}`,
		`{"value":"ts-s","timestamp":"1700000000"}`,
		`{"value":"ts-rfc","timestamp":"2024-10-10T12:00:00+02:00"}`,
		`{"value":"h","headers":[{"key":"a","value":null},{"key":"a","value":{"base64":"/w=="}}]}`,
		`{"offset":99,"value":"with offset"}`,
	} {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte(line + "\n"))
		require.NoError(t, err, "%q", line)
		require.NoError(t, f.Close())
	}
	require.Equal(t, []string{"crlf", "spaced", "😀", "nul\x00x", "\x00\xff", "k", "ts-s", "ts-rfc", "h", "with offset"}, values(t, p))
}
