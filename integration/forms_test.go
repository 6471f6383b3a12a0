package integration

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/logfs/logfs/fs"
	"github.com/logfs/logfs/record"
)

// TestJSONLinesRefused: through the mount, append.jsonl lines that would
// silently become something else fail their write with EINVAL and append
// nothing: null, {}, a lone surrogate, bytes that are not UTF-8.
func TestJSONLinesRefused(t *testing.T) {
	l, _ := newLog(t, nil)
	p := newPartition(t, l, "j", nil)
	mnt := mount(t, l, fs.Options{})
	app := q(filepath.Join(part(mnt, "j", 0), "append.jsonl"))
	for _, line := range []string{`null`, `{}`, `{"key":"k"}`, `{"value":"\ud800"}`, `{"value":"a\udc00"}`} {
		errOut := shFails(t, "printf '%%s\\n' %s >> %s", q(line), app)
		require.Contains(t, errOut, "Invalid argument", line)
	}
	errOut := shFails(t, `printf '{"value":"\xff"}\n' >> %s`, app)
	require.Contains(t, errOut, "Invalid argument")
	require.Equal(t, record.Offset(0), p.EndOffset(), "nothing appended")
	sh(t, `printf '%%s\n' '{"value":null}' '{"value":"\ud83d\ude00"}' >> %s`, app)
	require.Equal(t, "\n\U0001F600\n", sh(t, "cat %s", q(filepath.Join(part(mnt, "j", 0), "offset", "0"))))
}
