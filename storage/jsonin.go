package storage

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// checkJSONLine refuses what encoding/json would accept from a line of
// append.jsonl and turn into something else without a word: a line that
// is not an object (`null` decodes as an empty record), bytes that are not
// UTF-8, and lone UTF-16 surrogates (`"\ud800"`), both of which it
// replaces with U+FFFD. Bytes that are not text go in {"base64":"…"}.
func checkJSONLine(line []byte) error {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: a record is a JSON object, such as {\"value\":\"hello\"}, not %.20s", ErrInvalidRecord, trimmed)
	}
	if !utf8.Valid(line) {
		return fmt.Errorf("%w: the line is not UTF-8; give bytes as {\"base64\":\"…\"}", ErrInvalidRecord)
	}
	if bytes.Contains(line, []byte(`\u`)) {
		if err := checkSurrogates(line); err != nil {
			return fmt.Errorf("%w: %v; give bytes that are not text as {\"base64\":\"…\"}", ErrInvalidRecord, err)
		}
	}
	return nil
}

// checkSurrogates finds a \u escape of a UTF-16 surrogate that is not one
// half of a pair, inside a string of the JSON text b.
func checkSurrogates(b []byte) error {
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(b):
			if b[i+1] != 'u' {
				i++ // \" \\ \n …
				continue
			}
			r, ok := hex4(b, i+2)
			if !ok {
				return nil // malformed: the decoder says so
			}
			switch {
			case r >= 0xdc00 && r <= 0xdfff:
				return fmt.Errorf("a lone low surrogate \\u%04x", r)
			case r >= 0xd800 && r <= 0xdbff:
				lo, ok := rune(0), false
				if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
					lo, ok = hex4(b, i+8)
				}
				if !ok || lo < 0xdc00 || lo > 0xdfff {
					return fmt.Errorf("a lone high surrogate \\u%04x", r)
				}
				i += 11 // both escapes
			default:
				i += 5
			}
		}
	}
	return nil
}

// hex4 reads the four hex digits of a \u escape at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// errNoValue is the error of a record object without "value".
var errNoValue = errors.New(`a record needs "value" (null for a record with a null value)`)
