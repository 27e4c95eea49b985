// Package cparse reads numbers the way C's library does, for the places
// where Slurm's behaviour on odd input (blanks, signs, overflow, trailing
// text) is part of what users see: file name patterns, rlimits, nice.
package cparse

// Strtoul is strtoul(s, &end, 10): leading blanks, an optional sign (a
// '-' negates modulo 2^64), decimal digits. On overflow it returns the
// maximum, whatever the sign. n is how many bytes were used; 0 when there
// are no digits.
func Strtoul(s string) (v uint64, n int) {
	i := 0
	for i < len(s) && IsSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	overflow := false
	for i < len(s) && IsDigit(s[i]) {
		d := uint64(s[i] - '0')
		if v > (^uint64(0)-d)/10 {
			overflow = true
		}
		v = v*10 + d
		i++
	}
	if i == start {
		return 0, 0
	}
	switch {
	case overflow:
		v = ^uint64(0)
	case neg:
		v = -v
	}
	return v, i
}

// Atoi is atoi: leading blanks, an optional sign, digits; 0 if none.
func Atoi(s string) int {
	i := 0
	for i < len(s) && IsSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	v := 0
	for i < len(s) && IsDigit(s[i]) {
		v = v*10 + int(s[i]-'0')
		i++
	}
	if neg {
		return -v
	}
	return v
}

// IsDigit is isdigit in the C locale.
func IsDigit(c byte) bool { return c >= '0' && c <= '9' }

// IsSpace is isspace in the C locale.
func IsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
