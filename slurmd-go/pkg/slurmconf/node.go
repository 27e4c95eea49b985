package slurmconf

import (
	"fmt"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// Node is one node of a NodeName line after hostlist expansion, with the
// DEFAULT values in force at that line and Slurm's derivation rules applied
// (_parse_nodename in read_config.c, expand_nodeline_info in node_conf.c).
type Node struct {
	Name      string
	Addr      string // NodeAddr; defaults to Hostname
	Hostname  string // NodeHostname; defaults to Name
	BcastAddr string
	Port      uint16 // Port; defaults to SlurmdPort

	CPUs            uint16
	Boards          uint16
	Sockets         uint16 // total sockets (Boards * SocketsPerBoard)
	SocketsPerBoard uint16 // Sockets / Boards, as `slurmd -C` prints it
	CoresPerSocket  uint16
	ThreadsPerCore  uint16
	RealMemory      uint64 // MiB; Slurm's default is 1
	TmpDisk         uint32 // MiB
	Weight          uint32 // default 1
	MemSpecLimit    uint64
	CoreSpecCount   uint16
	CPUSpecList     string
	CpuBind         string
	Features        []string // Feature/Features split at ','
	Gres            string
	State           string // as written; "" means UNKNOWN
	Reason          string
	TRESWeights     string

	// Line is the NodeName line (names as written) this node came from.
	Line     string
	File     string
	LineNo   int
	LineKeys map[string]string // keys given on the line, lower-cased
}

// nodeTemplate is a NodeName line with defaults applied but names not yet
// expanded.
type nodeTemplate struct {
	names, hostnames, addrs, bcast, port string
	n                                    Node
}

// ParseNodeLine parses the body of a NodeName line as slurmd -Z --conf
// passes it ("NodeName=x CPUs=4 Gres=gpu:1 Feature=a,b"); the NodeName key
// may be omitted, the node is then called "". Node derivation rules apply;
// Port is left 0 when not given.
func ParseNodeLine(s string) (*Node, error) {
	text := strings.TrimSpace(s)
	name := ""
	if kv, ok := matchKeyValue(text); ok && strings.EqualFold(kv.key, "NodeName") {
		name, text = kv.value, kv.rest
	}
	p := &parser{rel: release{V2205}, nodeDefault: map[string]string{}}
	rest, err := p.parseSection("NodeName", name, text, pos{file: "--conf", line: 1})
	if err != nil {
		return nil, err
	}
	if !isBlank(rest) {
		return nil, perr("--conf", 1, ErrSyntax, "Parse error: %q", strings.TrimSpace(rest))
	}
	if len(p.nodes) != 1 {
		return nil, perr("--conf", 1, ErrInvalid, "not a node line: %q", s)
	}
	var warns []string
	t := buildTemplate(&p.nodes[0], func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
	n := t.n
	n.Name = name
	n.Hostname = name
	n.Addr = name
	if v, ok := p.nodes[0].keys["nodehostname"]; ok {
		n.Hostname, n.Addr = v, v
	}
	if v, ok := p.nodes[0].keys["nodeaddr"]; ok {
		n.Addr = v
	}
	n.BcastAddr = p.nodes[0].keys["bcastaddr"]
	if t.port != "" {
		port, ok := atoiPort(t.port)
		if !ok {
			return nil, perr("--conf", 1, ErrInvalid, "Invalid Port %s", t.port)
		}
		n.Port = port
	}
	return &n, nil
}

// buildTemplate applies _parse_nodename's defaults and consistency fixes.
func buildTemplate(s *section, warn func(string, ...any)) nodeTemplate {
	// Slurm's starting values (_init_conf_node).
	n := Node{Boards: 1, CoresPerSocket: 1, CPUs: 1, RealMemory: 1, ThreadsPerCore: 1, Sockets: 1, Weight: 1}
	t := nodeTemplate{names: s.name}
	lk, dk := s.keys, s.dflt
	first := func(srcs ...[2]string) (string, bool) {
		for _, kv := range srcs {
			m := lk
			if kv[0] == "d" {
				m = dk
			}
			if v, ok := m[kv[1]]; ok {
				return v, true
			}
		}
		return "", false
	}
	u16 := func(key string, dst *uint16) bool {
		v, ok := s.get(key)
		if ok {
			x, _ := parseUint(key, v, 16)
			*dst = uint16(x)
		}
		return ok
	}

	t.hostnames = s.name
	if v, ok := lk["nodehostname"]; ok {
		t.hostnames = v
	}
	t.addrs = t.hostnames
	if v, ok := lk["nodeaddr"]; ok {
		t.addrs = v
	}
	t.bcast = lk["bcastaddr"]
	t.port, _ = s.get("port")

	u16("boards", &n.Boards)
	if v, ok := s.get("cpubind"); ok {
		n.CpuBind = v
	}
	u16("corespeccount", &n.CoreSpecCount)
	u16("corespersocket", &n.CoresPerSocket)
	n.CPUSpecList, _ = s.get("cpuspeclist")
	if v, ok := first([2]string{"l", "feature"}, [2]string{"l", "features"}, [2]string{"d", "feature"}, [2]string{"d", "features"}); ok && v != "" {
		n.Features = strings.Split(v, ",")
	}
	n.Gres, _ = s.get("gres")
	if v, ok := s.get("memspeclimit"); ok {
		n.MemSpecLimit, _ = parseUint("MemSpecLimit", v, 64)
	}
	noCPUs := true
	if v, ok := first([2]string{"l", "cpus"}, [2]string{"d", "cpus"}, [2]string{"l", "procs"}, [2]string{"d", "procs"}); ok {
		x, _ := parseUint("CPUs", v, 16)
		n.CPUs, noCPUs = uint16(x), false
	}
	if v, ok := s.get("realmemory"); ok {
		n.RealMemory, _ = parseUint("RealMemory", v, 64)
	}
	n.Reason, _ = s.get("reason")
	noSockets := !u16("sockets", &n.Sockets)
	var spb uint16 = 1
	noSPB := !u16("socketsperboard", &spb)
	if noSPB {
		spb = 1
	}
	n.State, _ = s.get("state")
	u16("threadspercore", &n.ThreadsPerCore)
	if v, ok := s.get("tmpdisk"); ok {
		x, _ := parseUint("TmpDisk", v, 32)
		n.TmpDisk = uint32(x)
	}
	n.TRESWeights, _ = s.get("tresweights")
	if v, ok := s.get("weight"); ok {
		x, _ := parseUint("Weight", v, 32)
		n.Weight = uint32(x)
		if n.Weight == Infinite32 {
			n.Weight--
		}
	}

	name := s.name
	if n.CoresPerSocket == 0 {
		warn("NodeNames=%s CoresPerSocket=0 is invalid, reset to 1", name)
		n.CoresPerSocket = 1
	}
	if n.CPUs == 0 {
		warn("NodeNames=%s CPUs=0 is invalid, reset to 1", name)
		n.CPUs = 1
	}
	if n.ThreadsPerCore == 0 {
		warn("NodeNames=%s ThreadsPerCore=0 is invalid, reset to 1", name)
		n.ThreadsPerCore = 1
	}
	if spb == 0 {
		warn("NodeNames=%s SocketsPerBoards=0 is invalid, reset to 1", name)
		spb = 1
	}
	if n.Sockets == 0 {
		warn("NodeNames=%s Sockets=0 is invalid, reset to 1", name)
		n.Sockets = 1
	}
	if !noSPB && !noSockets {
		warn("NodeNames=%s Sockets=# and SocketsPerBoard=# is invalid , using SocketsPerBoard", name)
		noSockets = true
	}
	if n.Boards == 0 {
		warn("NodeNames=%s Boards=0 is invalid, reset to 1", name)
		n.Boards = 1
	}
	// 16-bit arithmetic as in C (uint16_t fields, int promotion).
	ct := int(n.CoresPerSocket) * int(n.ThreadsPerCore)
	if noSockets {
		switch {
		case !noSPB:
			n.Sockets = uint16(int(n.Boards) * int(spb))
		case !noCPUs && int(n.CPUs)/ct != 0 && int(n.CPUs)%ct == 0:
			n.Sockets = uint16(int(n.CPUs) / ct)
		default:
			n.Sockets = n.Boards
		}
	}
	if noCPUs {
		n.CPUs = uint16(int(n.Sockets) * ct)
	}
	if n.Sockets < n.Boards {
		warn("NodeNames=%s Sockets(%d) < Boards(%d) resetting Boards=1", name, n.Sockets, n.Boards)
		n.Boards = 1
	}
	sc := int(n.Sockets) * int(n.CoresPerSocket)
	if c := int(n.CPUs); c != int(n.Sockets) && c != sc && c != sc*int(n.ThreadsPerCore) {
		warn("NodeNames=%s CPUs=%d match no Sockets, Sockets*CoresPerSocket or Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs.", name, n.CPUs)
		n.CPUs = uint16(sc * int(n.ThreadsPerCore))
	}
	if int(n.CoreSpecCount) >= sc {
		warn("NodeNames=%s CoreSpecCount=%d is invalid, reset to 1", name, n.CoreSpecCount)
		n.CoreSpecCount = 1
	}
	if n.CoreSpecCount > 0 && n.CPUSpecList != "" {
		warn("NodeNames=%s CoreSpecCount=%d is invalid with CPUSpecList, reset to 0", name, n.CoreSpecCount)
		n.CoreSpecCount = 0
	}
	if n.MemSpecLimit >= n.RealMemory {
		if n.MemSpecLimit != 0 {
			warn("NodeNames=%s MemSpecLimit=%d is invalid, reset to 0", name, n.MemSpecLimit)
		}
		n.MemSpecLimit = 0
	}
	n.SocketsPerBoard = n.Sockets / n.Boards
	n.Line = s.name
	n.File, n.LineNo = s.file, s.line
	n.LineKeys = s.keys
	t.n = n
	return t
}

// validNodeState is state_str2int's acceptance test (22.05 also takes
// EXTERNAL...).
func validNodeState(s string, r release) bool {
	for _, st := range []string{"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"} {
		if strings.EqualFold(s, st) {
			return true
		}
	}
	u := strings.ToUpper(s)
	if strings.HasPrefix(u, "EXTERNAL") && !r.atLeast(V2411) {
		return true
	}
	return strings.HasPrefix(u, "CLOUD") || strings.HasPrefix(u, "DRAIN") || strings.HasPrefix(u, "FAIL")
}

// atoiPort is atoi() of a port string, which must give 1..65535.
func atoiPort(s string) (uint16, bool) {
	n, _, _ := strtol10(s)
	if n <= 0 || n > 0xffff {
		return 0, false
	}
	return uint16(n), true
}

// nodes expands every NodeName line as expand_nodeline_info (node_conf.c)
// does: the multiple-slurmd rules of doc.go; 24.11 also wants one
// NodeHostname or one per name.
func (b *builder) nodes() error {
	c, r := b.c, b.r
	c.nodeByName = map[string]*Node{}
	c.nodeByHost = map[string]*Node{}
	for i := range b.p.nodes {
		s := &b.p.nodes[i]
		fatal := func(format string, args ...any) error {
			return pfatal(s.file, s.line, ErrInvalid, format, args...)
		}
		// Its warnings were logged when the line was parsed.
		t := buildTemplate(s, func(string, ...any) {})
		if t.names == "" {
			return fatal("Empty NodeName in config.")
		}
		if t.n.State != "" && !validNodeState(t.n.State, r) {
			return &ParseError{File: s.file, Line: s.line, Err: ErrInvalid,
				Msg:   fmt.Sprintf("node %s has invalid state %s", t.names, t.n.State),
				Fatal: fmt.Sprintf("Invalid state %s from %s", t.n.State, t.names)}
		}
		expand := func(what, expr string) ([]string, error) {
			h, err := hostlist.Expand(expr)
			if err != nil {
				return nil, fatal("Unable to create %s list from %s", what, expr)
			}
			return h, nil
		}
		// The lists in node_conf.c's order, which picks the error.
		addrs, err := expand("NodeAddr", t.addrs)
		if err != nil {
			return err
		}
		names, err := expand("NodeName", t.names)
		if err != nil {
			return err
		}
		var bcast []string
		if t.bcast != "" {
			if bcast, err = expand("BcastAddr", t.bcast); err != nil {
				return err
			}
		}
		hosts, err := expand("NodeHostname", t.hostnames)
		if err != nil {
			return err
		}
		portExpr := t.port
		if portExpr != "" && portExpr[0] != '[' && strings.ContainsAny(portExpr, "-,") {
			portExpr = "[" + portExpr + "]"
		}
		ports, err := expand("Port", portExpr)
		if err != nil {
			return err
		}
		switch {
		case len(addrs) != len(names) && len(addrs) != 1:
			switch {
			case r.atLeast(V2605):
				return fatal("NodeAddr count must equal that of NodeName records or there must be no more than one")
			case r.atLeast(V2411):
				return fatal("NodeAddr count must equal that of NodeName records or  there must be no more than one")
			}
			return fatal("NodeAddr count must equal that of NodeName records of there must be no more than one")
		case len(bcast) > 1 && len(bcast) != len(names):
			if r.atLeast(V2411) {
				return fatal("BcastAddr count must equal that of NodeName records or there must be no more than one")
			}
			return fatal("BcastAddr count must equal that of NodeName records, or there must be no more than one")
		case len(hosts) != len(names) && len(hosts) != 1 && r.check(V2411, 0):
			return fatal("NodeHostname count must equal that of NodeName records or there must be no more than one")
		case len(ports) != len(names) && len(ports) > 1:
			return fatal("Port count must equal that of NodeName records or there must be no more than one (%d != %d)", len(ports), len(names))
		}
		port := c.SlurmdPort
		for k, name := range names {
			n := t.n
			n.Name = name
			n.Addr = addrs[min(k, len(addrs)-1)]
			if len(hosts) > 0 {
				n.Hostname = hosts[min(k, len(hosts)-1)]
			}
			if len(bcast) > 0 {
				n.BcastAddr = bcast[min(k, len(bcast)-1)]
			}
			if k < len(ports) {
				p, ok := atoiPort(ports[k])
				if !ok {
					return fatal("Invalid Port %s", t.port)
				}
				port = p
			}
			n.Port = port
			if _, dup := c.nodeByName[name]; dup {
				return fatal("Duplicated NodeName %s in the config file", name)
			}
			np := &n
			c.nodes = append(c.nodes, np)
			c.nodeByName[name] = np
			if _, seen := c.nodeByHost[np.Hostname]; !seen {
				c.nodeByHost[np.Hostname] = np
			}
		}
	}
	return nil
}
