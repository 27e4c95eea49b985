package slurmconf

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/cparse"
)

// Slurm's "unlimited" markers for each integer width.
const (
	Infinite16 = math.MaxUint16
	Infinite32 = math.MaxUint32
	Infinite64 = math.MaxUint64
	NoVal16    = 0xfffe // Slurm's NO_VAL16, "not set"
)

// strtoul mimics C strtoull(s, &end, 0): leading blanks, an optional sign,
// "0x" hex, "0" octal or decimal. It returns the value, the unparsed rest,
// whether any digit was read and whether the value overflowed.
func strtoul(s string) (v uint64, rest string, any, overflow bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	switch {
	case i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && i+2 < len(s) && hexVal(s[i+2]) < 16:
		base, i = 16, i+2
	case i < len(s) && s[i] == '0':
		base = 8
	}
	start := i
	for ; i < len(s); i++ {
		d := hexVal(s[i])
		if d >= base {
			break
		}
		if v > (math.MaxUint64-d)/base {
			overflow = true
		}
		v = v*base + d
	}
	if i == start {
		return 0, s, false, false
	}
	if overflow {
		v = math.MaxUint64
	}
	if neg {
		v = -v
	}
	return v, s[i:], true, overflow
}

func hexVal(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 99
}

// parseUint is s_p_handle_uint16/32/64: strtoul base 0, an optional k/K
// (x1024) for 32 and 64 bits, UNLIMITED/INFINITE, no negatives. Messages
// are parse_value.c's, spelling quirks included.
func parseUint(key, value string, bits int) (uint64, error) {
	max := uint64(1)<<bits - 1
	if bits == 64 {
		max = math.MaxUint64
	}
	v, rest, _, overflow := strtoul(value)
	if bits > 16 && (strings.HasPrefix(rest, "k") || strings.HasPrefix(rest, "K")) {
		v *= 1024
		rest = rest[1:]
	}
	if rest != "" {
		if strings.EqualFold(value, "UNLIMITED") || strings.EqualFold(value, "INFINITE") {
			return max, nil
		}
		if bits == 16 {
			return 0, fmt.Errorf("%s value \"%s\" is not a valid number", key, value)
		}
		return 0, fmt.Errorf("%s value (%s) is not a valid number", key, value)
	}
	switch {
	case overflow:
		return 0, fmt.Errorf("%s value (%s) is out of range", key, value)
	case strings.HasPrefix(value, "-"):
		return 0, fmt.Errorf("%s value (%s) is less than zero", key, value)
	case v > max && bits == 16:
		return 0, fmt.Errorf("%s value (%s) is greater than 65535", key, value)
	case v > max:
		return 0, fmt.Errorf("%s value (%s) is greater than 4294967295", key, value)
	}
	return v, nil
}

// parseLong is s_p_handle_long.
func parseLong(key, value string) (int64, error) {
	v, rest, _, overflow := strtoul(value)
	if rest != "" {
		if strings.EqualFold(value, "UNLIMITED") || strings.EqualFold(value, "INFINITE") {
			return Infinite32, nil
		}
		return 0, fmt.Errorf("\"%s\" is not a valid number", value)
	}
	if overflow || (int64(v) < 0) != strings.HasPrefix(strings.TrimLeft(value, " \t"), "-") {
		return 0, fmt.Errorf("\"%s\" is out of range", value)
	}
	return int64(v), nil
}

// parseBool is s_p_handle_boolean.
func parseBool(key, value string) (bool, error) {
	switch strings.ToLower(value) {
	case "yes", "up", "true", "1":
		return true, nil
	case "no", "down", "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("\"%s\" is not a valid option for \"%s\"", value, key)
}

// parseFloat is s_p_handle_float: strtof over the whole value,
// UNLIMITED/INFINITE as +Inf.
func parseFloat(key, value string) (float32, error) {
	s := strings.TrimLeft(value, " \t\n\v\f\r")
	lo := strings.ToLower(s)
	if strings.HasPrefix(strings.TrimLeft(lo, "+-"), "0x") && !strings.Contains(lo, "p") {
		s += "p0" // C takes hex floats without an exponent, strconv does not
	}
	f, err := strconv.ParseFloat(s, 32)
	var ne *strconv.NumError
	switch {
	case err == nil && s != "" && !strings.Contains(s, "_"):
		return float32(f), nil
	case strings.EqualFold(value, "UNLIMITED") || strings.EqualFold(value, "INFINITE"):
		return float32(math.Inf(1)), nil
	case errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange):
		return 0, fmt.Errorf("%s value (%s) is out of range", key, value)
	}
	return 0, fmt.Errorf("%s value (%s) is not a valid number", key, value)
}

// suspendTimeOK is _parse_suspend_time (24.11): NONE, INFINITE, -1, or
// what strtoul(s, NULL, 10) reads as at most UINT32_MAX ("abc" is 0, a
// negative number wraps past it).
func suspendTimeOK(s string) bool {
	if strings.EqualFold(s, "NONE") || strings.EqualFold(s, "INFINITE") || s == "-1" {
		return true
	}
	v, _ := cparse.Strtoul(s)
	return v <= math.MaxUint32
}

// checkValue type-checks a value as the C parser does before storing it.
func checkValue(name string, k kind, value string) error {
	var err error
	switch k {
	case kUint16:
		_, err = parseUint(name, value, 16)
	case kUint32:
		_, err = parseUint(name, value, 32)
	case kUint64:
		_, err = parseUint(name, value, 64)
	case kLong:
		_, err = parseLong(name, value)
	case kBool:
		_, err = parseBool(name, value)
	case kFloat:
		_, err = parseFloat(name, value)
	}
	return err
}
