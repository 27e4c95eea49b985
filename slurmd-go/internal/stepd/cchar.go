package stepd

// C's character classes, for the parsers that mirror C library calls.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
