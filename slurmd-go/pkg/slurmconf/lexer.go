package slurmconf

import "strings"

// isSpace is C isspace in the "C" locale.
func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

func isKeyChar(c byte) bool {
	return c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			return false
		}
	}
	return true
}

// hashLine folds one raw physical line (newline included) into Slurm's
// slurm.conf hash (_compute_hash_val, a CRC-16/CCITT-like fold kept in 32
// bits). Bytes are sign-extended like C's char.
func hashLine(h uint32, line string) uint32 {
	for i := 0; i < len(line); i++ {
		h ^= uint32(int32(int8(line[i])) << 8)
		for b := 0; b < 8; b++ {
			if h&0x8000 != 0 {
				h = h<<1 ^ 4129
			} else {
				h <<= 1
			}
		}
	}
	return h
}

// stripComment cuts at the first '#' not escaped by an odd number of '\'.
func stripComment(line string) string {
	bs := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '#':
			if bs%2 == 0 {
				return line[:i]
			}
			bs = 0
		case '\\':
			bs++
		default:
			bs = 0
		}
	}
	return line
}

// stripContinuation reports whether line ends (blanks allowed after it) in an
// odd run of '\' and, if so, returns the line without the last '\' and
// whatever followed it.
func stripContinuation(line string) (string, bool) {
	i := len(line) - 1
	bs := 0
	for ; i >= 0; i-- {
		c := line[i]
		if c == '\\' {
			bs++
		} else if isSpace(c) && bs == 0 {
			continue
		} else {
			break
		}
	}
	if bs%2 == 1 {
		return line[:i+bs], true
	}
	return line, false
}

// stripEscapes drops every '\' and keeps the byte after it ("\\" gives "\").
func stripEscapes(line string) string {
	if strings.IndexByte(line, '\\') < 0 {
		return line
	}
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' {
			i++
			if i >= len(line) {
				break
			}
		}
		b.WriteByte(line[i])
	}
	return b.String()
}

// logicalLine is one line after comment, continuation and escape handling.
type logicalLine struct {
	text  string
	line  int // first physical line, 1-based
	lines int // physical lines consumed
}

// keyValue is one match of parse_config.c's keyvalue_pattern:
//
//	^\s*([[:alnum:]_.]+)\s*([-*+/]?)=\s*("([^"]*)"|([^\s]+))(\s|$)
//
// rest starts right after the value. ok is false when s does not start with
// a key=value pair.
type keyValue struct {
	key, op, value, rest string
}

func matchKeyValue(s string) (keyValue, bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	j := i
	for j < len(s) && isKeyChar(s[j]) {
		j++
	}
	if j == i {
		return keyValue{}, false
	}
	kv := keyValue{key: s[i:j]}
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	if j < len(s) && strings.IndexByte("-*+/", s[j]) >= 0 {
		kv.op = s[j : j+1]
		j++
	}
	if j >= len(s) || s[j] != '=' {
		return keyValue{}, false
	}
	j++
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	// Unquoted run of non-blanks (always ends at a blank or the end).
	u := j
	for u < len(s) && !isSpace(s[u]) {
		u++
	}
	// Quoted form; POSIX leftmost-longest picks it when it is at least as
	// long (a tie goes to the quoted form, verified with scontrol 22.05).
	if j < len(s) && s[j] == '"' {
		if e := strings.IndexByte(s[j+1:], '"'); e >= 0 {
			e += j + 1
			if (e+1 == len(s) || isSpace(s[e+1])) && e+1 >= u {
				kv.value, kv.rest = s[j+1:e], s[e+1:]
				return kv, true
			}
		}
	}
	if u == j {
		return keyValue{}, false
	}
	kv.value, kv.rest = s[j:u], s[u:]
	return kv, true
}
