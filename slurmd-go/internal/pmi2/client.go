package pmi2

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PMI versions a client may ask for at init (client.c set_pmi_version).
const (
	pmi11Version, pmi11Subversion = 1, 1
	pmi20Version, pmi20Subversion = 2, 0
)

// Limits of the PMI-1 get_maxes answer and of PMI-2 keys and values
// (pmi.h MAXKVSNAME, MAXKEYLEN, MAXVALLEN, PMI2_MAX_*).
const (
	maxKVSName = 256
	maxKeyLen  = 64
	maxValLen  = 1024
	// maxLine bounds one PMI-1 request line and a PMI-2 request: a value
	// is at most maxValLen, its key and the command are short.
	maxLine = 4 * maxValLen
)

// ErrBadRequest marks a client request that does not parse.
var ErrBadRequest = errors.New("pmi2: bad client request")

// request is a parsed client request (client.c client_req_t): the command
// and its key/value pairs in order (spawn repeats keys). bodyErr says where
// the pairs stopped parsing: as stock, the command still runs with the
// pairs before it (MPICH's abort carries a free-text message).
type request struct {
	cmd     string
	pairs   [][2]string
	bodyErr error
}

func (r *request) get(key string) (string, bool) {
	for _, kv := range r.pairs {
		if kv[0] == key {
			return kv[1], true
		}
	}
	return "", false
}

// getInt is client_req_get_int: atoi of the value.
func (r *request) getInt(key string) (int, bool) {
	v, ok := r.get(key)
	if !ok {
		return 0, false
	}
	return atoi(v), true
}

// getBool is client_req_get_bool: TRUE (any case) is true.
func (r *request) getBool(key string) (bool, bool) {
	v, ok := r.get(key)
	if !ok {
		return false, false
	}
	return strings.EqualFold(v, "TRUE"), true
}

// atoi is C's atoi: leading blanks, a sign, digits; anything else stops it.
func atoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' || n > 1<<31 {
			break
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

// parseRequest splits "cmd=<cmd><sep>k=v<sep>...<term>" as _parse_cmd and
// client_req_parse_body do: PMI-1 separates with ' ' and ends with '\n',
// PMI-2 uses ';' for both. Values cannot hold the separator.
func parseRequest(buf string, pmi2 bool) (*request, error) {
	sep, term := byte(' '), byte('\n')
	if pmi2 {
		sep, term = ';', ';'
	}
	if strings.HasPrefix(buf, "mcmd=") {
		return &request{cmd: "mcmd"}, nil
	}
	if !strings.HasPrefix(buf, "cmd=") {
		return nil, fmt.Errorf("%w: request not begin with 'cmd=': %q", ErrBadRequest, clip(buf))
	}
	i := len("cmd=")
	j := i
	for j < len(buf) && buf[j] != sep && buf[j] != term {
		j++
	}
	if j >= len(buf) {
		return nil, fmt.Errorf("%w: cmd not properly terminated in client request: %q", ErrBadRequest, clip(buf))
	}
	r := &request{cmd: buf[i:j]}
	for k := j + 1; k < len(buf); {
		eq := strings.IndexByte(buf[k:], '=')
		if eq < 0 {
			if strings.TrimRight(buf[k:], "\n") == "" {
				break // the PMI-1 line's end
			}
			r.bodyErr = fmt.Errorf("%w: no value for key %s in req", ErrBadRequest, clip(buf[k:]))
			break
		}
		key := buf[k : k+eq]
		v := k + eq + 1
		e := v
		for e < len(buf) && buf[e] != sep && buf[e] != term {
			e++
		}
		if e >= len(buf) {
			r.bodyErr = fmt.Errorf("%w: value not properly terminated in client request", ErrBadRequest)
			break
		}
		r.pairs = append(r.pairs, [2]string{key, buf[v:e]})
		k = e + 1
	}
	return r, nil
}

// parseInit reads the PMI-1 init every client sends first (agent.c
// _handle_pmi1_init: sscanf "cmd=init pmi_version=%d pmi_subversion=%d").
func parseInit(line string) (version, subversion int, ok bool) {
	r, err := parseRequest(line, false)
	if err != nil || r.cmd != "init" || len(r.pairs) < 2 ||
		r.pairs[0][0] != "pmi_version" || r.pairs[1][0] != "pmi_subversion" {
		return 0, 0, false
	}
	v, err1 := strconv.Atoi(r.pairs[0][1])
	s, err2 := strconv.Atoi(r.pairs[1][1])
	return v, s, err1 == nil && err2 == nil
}

// pmi2Frame prefixes a PMI-2 response with its length, "%-6d".
func pmi2Frame(body string) []byte {
	return []byte(fmt.Sprintf("%-6d%s", len(body), body))
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
