package topoapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Protocol constants. A client that speaks another version gets an error
// line naming Version, so that a newer plugin against an older daemon says
// why instead of hanging or misreading.
const (
	Magic   = "TIEE-TOPOLOGY"
	Version = 1
	// SocketName is the socket's name in SlurmdSpoolDir.
	SocketName = "tiee-topology.sock"
	// MaxRequest bounds a request line: room for ~50k node names.
	MaxRequest = 1 << 20
	// MaxNodes bounds the nodes of one request.
	MaxNodes = 65536
	// None stands for an unknown or unset field in a reply line.
	None = "-"
)

// ErrBadRequest is wrapped by every refusal of a request line.
var ErrBadRequest = errors.New("topoapi: bad request")

// ErrVersion is wrapped when the client speaks another protocol version.
var ErrVersion = errors.New("topoapi: unsupported version")

// NodeInfo is what the API tells about one node. Empty fields are sent as
// None.
type NodeInfo struct {
	Name  string
	Addr  string // NodeAddr (host or IP) slurmd listens on
	Port  uint16 // slurmd's port; 0 when unknown
	Zone  string // the leaf switch holding the node
	Block string // topology/block's block
}

// ParseRequest parses one request line (without its newline) into the
// requested node names, deduplicated, in request order.
func ParseRequest(line string) ([]string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: empty request", ErrBadRequest)
	}
	if f[0] != Magic {
		return nil, fmt.Errorf("%w: request does not start with %s", ErrBadRequest, Magic)
	}
	if len(f) < 2 {
		return nil, fmt.Errorf("%w: no protocol version", ErrBadRequest)
	}
	// The version first: another version's request may have another shape.
	if v, err := strconv.Atoi(f[1]); err != nil || v != Version {
		return nil, fmt.Errorf("%w %s, this daemon speaks %d", ErrVersion, f[1], Version)
	}
	if len(f) != 4 || f[2] != "NODES" {
		return nil, fmt.Errorf("%w: want %q", ErrBadRequest, Magic+" 1 NODES <name>,<name>,...")
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(f[3], ",") {
		if n == "" {
			return nil, fmt.Errorf("%w: empty node name", ErrBadRequest)
		}
		if strings.ContainsAny(n, "[]") {
			// "n[1-3]" would be split at its commas: the client expands.
			return nil, fmt.Errorf("%w: node name %q: send expanded names, not a hostlist", ErrBadRequest, n)
		}
		if seen[n] {
			continue
		}
		if len(names) == MaxNodes {
			return nil, fmt.Errorf("%w: more than %d nodes", ErrBadRequest, MaxNodes)
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, nil
}

// FormatRequest is the request line for names, with its newline.
func FormatRequest(names []string) string {
	return fmt.Sprintf("%s %d NODES %s\n", Magic, Version, strings.Join(names, ","))
}

// FormatNode is n's reply line, with its newline.
func FormatNode(n NodeInfo) string {
	port := None
	if n.Port != 0 {
		port = strconv.Itoa(int(n.Port))
	}
	return fmt.Sprintf("node %s addr %s port %s zone %s block %s\n", n.Name, orNone(n.Addr), port, orNone(n.Zone), orNone(n.Block))
}

// FormatError is the error reply for err: one line, the package prefix
// dropped (the client is no Go program).
func FormatError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "topoapi: ")
	msg = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, msg)
	return "error " + msg + "\n"
}

func orNone(s string) string {
	// A value with blanks would break the line's fields.
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return None
	}
	return s
}
