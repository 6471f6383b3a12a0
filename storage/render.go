package storage

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/logfs/logfs/record"
)

// Format is how records are rendered as bytes in views and by consume.
type Format uint8

const (
	// Values renders each record's value followed by '\n'; a null value is
	// an empty line.
	Values Format = iota
	// JSONL renders one JSON object per line:
	//
	//	{"offset":7,"timestamp":1700000000000,"key":"k","headers":[{"key":"h","value":"v"}],"value":"hello"}
	//
	// Keys, values and header values that are not valid UTF-8 are written
	// as {"base64":"…"}; null ones as null. append.jsonl takes the same
	// objects (see ParseJSONRecord).
	JSONL
	numFormats
)

// ParseFormat parses "values" or "jsonl".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "values", "":
		return Values, nil
	case "jsonl", "json":
		return JSONL, nil
	}
	return 0, fmt.Errorf("unknown format %q: want values or jsonl", s)
}

func (f Format) String() string {
	if f == JSONL {
		return "jsonl"
	}
	return "values"
}

// Append appends the rendering of r to dst.
func (f Format) Append(dst []byte, r *record.Record) []byte {
	if f == Values {
		dst = append(dst, r.Value...)
		return append(dst, '\n')
	}
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendInt(dst, int64(r.Offset), 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, r.Timestamp, 10)
	dst = append(dst, `,"key":`...)
	dst = appendJSONBytes(dst, r.Key)
	if len(r.Headers) > 0 {
		dst = append(dst, `,"headers":[`...)
		for i, h := range r.Headers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"key":`...)
			dst = appendJSONBytes(dst, h.Key)
			dst = append(dst, `,"value":`...)
			dst = appendJSONBytes(dst, h.Value)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"value":`...)
	dst = appendJSONBytes(dst, r.Value)
	return append(dst, "}\n"...)
}

// Size returns the length of r's rendering.
func (f Format) Size(r *record.Record, scratch []byte) (int64, []byte) {
	if f == Values {
		return int64(len(r.Value)) + 1, scratch
	}
	scratch = f.Append(scratch[:0], r)
	return int64(len(scratch)), scratch
}

// appendJSONBytes writes b as a JSON string when it is valid UTF-8, as
// {"base64":"…"} when it is not, and as null when it is nil.
func appendJSONBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	if !utf8.Valid(b) {
		dst = append(dst, `{"base64":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, `"}`...)
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, b[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// jsonBytes is a key, value or header value in a JSON record: a string, null,
// or {"base64":"…"}.
type jsonBytes struct {
	b   []byte
	set bool // present in the object (null or not)
}

func (j *jsonBytes) UnmarshalJSON(data []byte) error {
	j.set = true
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		j.b = nil
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		j.b = []byte(s)
		return nil
	case len(data) > 0 && data[0] == '{':
		var obj struct {
			Base64 *string `json:"base64"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil || obj.Base64 == nil {
			return fmt.Errorf(`want a string, null or {"base64":"…"}`)
		}
		b, err := base64.StdEncoding.DecodeString(*obj.Base64)
		if err != nil {
			return fmt.Errorf("bad base64: %w", err)
		}
		j.b = b
		return nil
	}
	return fmt.Errorf(`want a string, null or {"base64":"…"}, got %.20s`, data)
}

type jsonHeader struct {
	Key   jsonBytes `json:"key"`
	Value jsonBytes `json:"value"`
}

// ParseJSONRecord parses one line of append.jsonl: an object with "value"
// and any of "key", "headers" and "timestamp", in the JSONL rendering's
// shape; the text must be UTF-8 without lone surrogates (checkJSONLine).
// "offset" is accepted and ignored, so a consumed line can be appended back.
// Headers may also be given as an object {"name": value, …}.
func ParseJSONRecord(line []byte) (Record, error) {
	if err := checkJSONLine(line); err != nil {
		return Record{}, err
	}
	var obj struct {
		Offset    *int64          `json:"offset"`
		Timestamp json.RawMessage `json:"timestamp"`
		Key       jsonBytes       `json:"key"`
		Value     jsonBytes       `json:"value"`
		Headers   json.RawMessage `json:"headers"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if dec.More() {
		return Record{}, fmt.Errorf("%w: one object per line", ErrInvalidRecord)
	}
	r := Record{Key: obj.Key.b, Value: obj.Value.b}
	if ts, err := parseJSONTimestamp(obj.Timestamp); err != nil {
		return Record{}, fmt.Errorf("%w: timestamp %s: %v", ErrInvalidRecord, obj.Timestamp, err)
	} else {
		r.Timestamp = ts
	}
	hs, err := parseJSONHeaders(obj.Headers)
	if err != nil {
		return Record{}, fmt.Errorf("%w: headers: %v", ErrInvalidRecord, err)
	}
	r.Headers = hs
	if !obj.Value.set {
		return Record{}, fmt.Errorf("%w: %v", ErrInvalidRecord, errNoValue)
	}
	return r, nil
}

// parseJSONTimestamp reads a record's "timestamp": a number of
// milliseconds since 1970, as .jsonl prints it, or a string in any form
// time/ takes (RFC 3339, a date, unix seconds or milliseconds; see
// ParseTimestamp). Absent or null is 0: the wall clock at the append.
func parseJSONTimestamp(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	var ms int64
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		var err error
		if ms, err = ParseTimestamp(s); err != nil {
			return 0, errors.New("want milliseconds since 1970, RFC 3339 (\"2024-10-10T12:00:00Z\") or a date (\"2024-10-10\")")
		}
	} else if err := json.Unmarshal(raw, &ms); err != nil {
		return 0, errors.New("want a whole number of milliseconds since 1970, or a string in RFC 3339")
	}
	if ms <= 0 {
		return 0, errors.New("want a time after 1970-01-01T00:00:00Z")
	}
	return ms, nil
}

func parseJSONHeaders(raw json.RawMessage) ([]record.Header, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '{' {
		var m map[string]jsonBytes
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys) // a JSON object has no order; give one
		hs := make([]record.Header, len(keys))
		for i, k := range keys {
			hs[i] = record.Header{Key: []byte(k), Value: m[k].b}
		}
		return hs, nil
	}
	var list []jsonHeader
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	hs := make([]record.Header, len(list))
	for i, h := range list {
		if h.Key.b == nil {
			return nil, fmt.Errorf("header %d: a header needs a key", i)
		}
		hs[i] = record.Header{Key: h.Key.b, Value: h.Value.b}
	}
	return hs, nil
}
