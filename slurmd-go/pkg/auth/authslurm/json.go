package authslurm

import (
	"sort"
	"strconv"
	"unicode/utf8"
)

// Stock tokens are made by libjwt 1.17 over jansson, which writes header and
// claims with JSON_COMPACT|JSON_SORT_KEYS. encoding/json cannot be told to
// write strings as jansson does (it escapes U+2028/U+2029 and writes control
// characters with lower-case hex), so tokens are written here: a value is a
// jsonObject, string, int64, uint32, []uint32 or []any.

// jsonObject is a JSON object; it is written with its keys in byte order.
type jsonObject map[string]any

// appendJSON appends v to dst as jansson would write it.
func appendJSON(dst []byte, v any) []byte {
	switch v := v.(type) {
	case jsonObject:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSON(dst, v[k])
		}
		return append(dst, '}')
	case string:
		return appendJSONString(dst, v)
	case int64:
		return strconv.AppendInt(dst, v, 10)
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10)
	case []uint32:
		dst = append(dst, '[')
		for i, n := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, uint64(n), 10)
		}
		return append(dst, ']')
	default:
		// Only this file's callers build values; a new type is a bug here.
		panic("authslurm: appendJSON: unsupported type")
	}
}

// appendJSONString writes s the way jansson's dump_string does without
// flags: the two-character escapes for " \ \b \f \n \r \t, \u00XX (upper-case
// hex) for the other control characters, everything else (/, DEL, non-ASCII)
// as is. Invalid UTF-8, which jansson refuses to hold, becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				dst = append(dst, c)
			}
		}
		i++
	}
	return append(dst, '"')
}
