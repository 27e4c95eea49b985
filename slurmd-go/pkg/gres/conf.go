package gres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

// ErrConf is wrapped by every *ConfError.
var ErrConf = errors.New("gres: invalid gres.conf")

// ConfError is a gres.conf problem stock slurmd exits on (fatal), with the
// file and line it was found on (Line 0: not tied to a line). Msg is the
// text stock logs; Lines adds the lines it logs before and the fatal one.
type ConfError struct {
	File string
	Line int
	Msg  string   // stock's fatal text
	Pre  []string // "error: ..." lines stock logs before the fatal one
	Err  error
}

func (e *ConfError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	if e.File != "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return e.Msg
}

func (e *ConfError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return ErrConf
}

// Lines are what stock slurmd prints for the error, level first.
func (e *ConfError) Lines() []string {
	return append(append([]string(nil), e.Pre...), "fatal: "+e.Msg)
}

// Message is a line stock slurmd logs while loading GRES and survives.
type Message struct {
	Level string // "error", "warning", "info", "debug"
	Text  string
}

// rec is gres_slurmd_conf_t while loading: config_flags as bits.
type rec struct {
	name, typ, file, cpus, links, uniqueID string
	count                                  uint64
	cpuCnt                                 uint32
	flags                                  uint32
	file0                                  string // gres.conf path and line, for errors
	line                                   int
}

func (r *rec) record() Record {
	return Record{Name: r.name, Type: r.typ, Count: r.count, File: r.file, Cores: r.cpus, Links: r.links,
		UniqueID: r.uniqueID, CPUCnt: r.cpuCnt, Flags: flagsOf(r.flags)}
}

func recOf(r Record) *rec {
	return &rec{name: r.Name, typ: r.Type, file: r.File, cpus: r.Cores, links: r.Links, uniqueID: r.UniqueID,
		count: r.Count, cpuCnt: r.CPUCnt, flags: r.Flags.bits()}
}

// Autodetect values (GRES_AUTODETECT_GPU_*).
const (
	AutoDetectUnset  = ""
	AutoDetectNVML   = "nvml"
	AutoDetectRSMI   = "rsmi"
	AutoDetectOneAPI = "oneapi"
	AutoDetectNRT    = "nrt" // 24.11 on
	AutoDetectNVIDIA = "nvidia"
	AutoDetectOff    = "off"
)

// parsed is gres.conf as read for one node.
type parsed struct {
	recs       []*rec
	autodetect string // the node's AutoDetect (local, else global), "" unset
	msgs       []Message
}

// confOptions are the inputs _parse_gres_config reads besides the file.
type confOptions struct {
	path      string
	nodeName  string
	cpuCnt    uint32
	version   uint16
	gresTypes []string           // GresTypes, for the names gres.conf may use
	exists    func(string) error // stat(2) of a File= entry; nil: os.Stat
	fileWait  time.Duration      // how long a missing File= is waited for (stock: 20 s)
}

// gresOptions are _gres_options: the keys of a Name=/NodeName= line.
var gresOptions = []string{"AutoDetect", "Count", "CPUs", "Cores", "File", "Files", "Flags", "Link", "Links",
	"MultipleFiles", "Name", "Type"}

func canonKey(k string, table []string) (string, bool) {
	for _, o := range table {
		if strings.EqualFold(o, k) {
			return o, true
		}
	}
	return "", false
}

// parseConf reads gres.conf as gres_g_node_config_load does for node
// opts.nodeName: lines of other nodes are checked for syntax and skipped.
func parseConf(ctx context.Context, o confOptions) (*parsed, error) {
	fatalRead := "error opening/reading " + o.path
	lines, err := slurmconf.ReadLines(o.path, fatalRead, slurmconf.Options{Version: o.version})
	if err != nil {
		var pe *slurmconf.ParseError
		if errors.As(err, &pe) {
			return &parsed{}, &ConfError{File: pe.File, Line: pe.Line, Msg: fatalRead, Pre: []string{"error: " + pe.Msg}, Err: err}
		}
		return &parsed{}, &ConfError{File: o.path, Msg: fatalRead, Err: err}
	}
	p := &parsed{}
	st := parseState{o: o, p: p}
	var global string
	for _, l := range lines {
		key, value, rest, ok := slurmconf.NextKeyValue(l.Text)
		if !ok {
			return p, st.syntax(l, l.Text)
		}
		top, known := canonKey(key, []string{"AutoDetect", "Name", "NodeName"})
		if !known {
			return p, &ConfError{File: l.File, Line: l.Line, Msg: fatalRead,
				Pre: []string{"error: Parsing error at unrecognized key: " + key,
					fmt.Sprintf("error: Parse error in file %s line %d: \"%s\"", l.File, l.Line, strings.TrimRight(l.Text, "\r\n"))}}
		}
		switch top {
		case "AutoDetect":
			global = value
			if !slurmconf.IsBlank(rest) {
				return p, st.syntax(l, rest)
			}
		case "Name":
			if err := st.line(ctx, l, value, false, rest); err != nil {
				return p, err
			}
		case "NodeName":
			if err := st.line(ctx, l, value, true, rest); err != nil {
				return p, err
			}
		}
	}
	// A node-local AutoDetect wins over the global one (_handle_global_autodetect).
	if st.localAuto != "" {
		p.autodetect = st.localAuto
		if global != "" {
			p.msgs = append(p.msgs, Message{"debug", "gres.conf: AutoDetect GPU flags were locally set, so ignoring global flags"})
		}
	} else if global != "" {
		a, err := autodetectValue(global, o.version)
		if err != "" {
			p.msgs = append(p.msgs, Message{"error", err})
		}
		p.autodetect = a
	}
	return p, nil
}

type parseState struct {
	o         confOptions
	p         *parsed
	localAuto string
	// prev is the static prev_env/prev_gres of _parse_gres_config: the
	// env flags of the last line that set them, inherited by the next
	// line of the same name.
	prevName     string
	prevFlags    uint32
	prevNoGPUEnv bool
	prevSet      bool
}

func (st *parseState) syntax(l slurmconf.Line, rest string) error {
	return &ConfError{File: l.File, Line: l.Line, Msg: "error opening/reading " + st.o.path,
		Pre: []string{fmt.Sprintf("error: Parse error in file %s line %d: \"%s\"", l.File, l.Line, strings.TrimRight(rest, "\r\n"))}}
}

// autodetectValue is _handle_autodetect_flags: "" and a message for an
// unknown value.
func autodetectValue(s string, v uint16) (string, string) {
	ls := strings.ToLower(s)
	switch {
	case strings.Contains(ls, "nvml"):
		return AutoDetectNVML, ""
	case v >= v2411 && strings.Contains(ls, "nvidia"):
		return AutoDetectNVIDIA, ""
	case strings.Contains(ls, "rsmi"):
		return AutoDetectRSMI, ""
	case strings.Contains(ls, "oneapi"):
		return AutoDetectOneAPI, ""
	case v >= v2411 && strings.Contains(ls, "nrt"):
		return AutoDetectNRT, ""
	case ls == "off":
		return AutoDetectOff, ""
	}
	return "", fmt.Sprintf("unknown autodetect flag '%s'", s)
}

// line is _parse_gres_config_node + _parse_gres_config for one line whose
// first key was Name= (nodeLine false, value the name) or NodeName=.
func (st *parseState) line(ctx context.Context, l slurmconf.Line, value string, nodeLine bool, rest string) error {
	kv := map[string]string{}
	for {
		k, v, r, ok := slurmconf.NextKeyValue(rest)
		if !ok {
			break
		}
		ck, known := canonKey(k, gresOptions)
		if !known {
			return &ConfError{File: l.File, Line: l.Line, Msg: "error opening/reading " + st.o.path,
				Pre: []string{"error: Parsing error at unrecognized key: " + k,
					fmt.Sprintf("error: Parse error in file %s line %d: \"%s\"", l.File, l.Line, strings.TrimRight(rest, "\r\n"))}}
		}
		kv[ck] = v
		rest = r
	}
	if !slurmconf.IsBlank(rest) {
		return st.syntax(l, rest)
	}
	if nodeLine {
		hl, err := hostlist.Parse(value)
		if err != nil || hl.Find(st.o.nodeName) < 0 {
			st.p.msgs = append(st.p.msgs, Message{"debug", fmt.Sprintf("skipping GRES for NodeName=%s %s", value, strings.TrimSpace(l.Text))})
			return nil
		}
	}
	get := func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	fatal := func(format string, args ...any) error {
		return &ConfError{File: l.File, Line: l.Line, Msg: fmt.Sprintf(format, args...)}
	}
	autodetect := false
	if a, ok := get("AutoDetect"); ok {
		if !nodeLine {
			st.p.msgs = append(st.p.msgs, Message{"error", "gres.conf: In-line AutoDetect requires NodeName to take effect"})
		} else {
			val, msg := autodetectValue(a, st.o.version)
			if msg != "" {
				st.p.msgs = append(st.p.msgs, Message{"error", msg})
			}
			if st.localAuto != "" && st.localAuto != val {
				return fatal("gres.conf: duplicate node-local AutoDetect specification does not match the first")
			}
			st.localAuto = val
			autodetect = true
		}
	}
	r := &rec{file0: l.File, line: l.Line, cpuCnt: st.o.cpuCnt}
	if nodeLine {
		n, ok := get("Name")
		if !ok {
			if !autodetect {
				st.p.msgs = append(st.p.msgs, Message{"error", fmt.Sprintf("Invalid GRES data, no type name (%s)", strings.TrimSpace(l.Text))})
			}
			return nil
		}
		r.name = n
	} else {
		r.name = value
	}
	if t, ok := get("Type"); ok {
		r.typ = t
		r.flags |= cfHasType
	}
	coresKey := "Cores"
	cores, hasCores := get("Cores")
	if !hasCores {
		coresKey = "CPUs"
		cores, hasCores = get("CPUs")
	}
	if hasCores {
		r.cpus = cores
		// Stock's xcpuinfo_abs_to_mac fails on ids beyond the node: it
		// logs and keeps the record, Cores as written.
		if err := checkCores(cores, st.o.cpuCnt); err != nil {
			st.p.msgs = append(st.p.msgs, Message{"error", "xcpuinfo_abs_to_mac: failed"},
				Message{"error", fmt.Sprintf("Invalid GRES data for %s, %s=%s", r.name, coresKey, cores)})
		}
	}
	file, hasFile := get("File")
	if !hasFile {
		file, hasFile = get("Files")
	}
	if hasFile {
		r.file = file
		n, err := st.validateFiles(ctx, file, l)
		if err != nil {
			return err
		}
		r.count = uint64(n)
		r.flags |= cfHasFile
	}
	if mf, ok := get("MultipleFiles"); ok {
		if hasFile {
			return fatal("File and MultipleFiles options are mutually exclusive")
		}
		r.file = mf
		r.count = 1
		n, err := st.validateFiles(ctx, mf, l)
		if err != nil {
			return err
		}
		if n < 2 {
			return fatal("MultipleFiles does not contain multiple files. Use File instead")
		}
		r.flags |= cfHasFile | cfMult
	}
	isMPS := strings.EqualFold(r.name, "mps")
	setDefaultEnvs := true
	v := st.o.version
	if fs, ok := get("Flags"); ok {
		flags, noGPUEnv, sharing := parseFlags(fs, v)
		if !sharing && isMPS {
			flags |= cfOneSharing
		}
		env := flags & cfEnvSet
		if v >= v2411 {
			r.flags |= flags
		} else {
			r.flags |= flags &^ cfEnvSet
		}
		if env != 0 && noGPUEnv {
			return fatal("Invalid GRES record name=%s type=%s: Flags (%s) contains \"no_gpu_env\", which must be mutually exclusive to all other GRES env flags of same node and name",
				r.name, cNull(r.typ), fs)
		}
		// 24.11 overrides the defaults for any Flags=; 22.05 and 26.05 only
		// for env flags or no_gpu_env. 24.11 and 26.05 compare and keep
		// all the flags, 22.05 only the env ones.
		if v == v2411 || env != 0 || noGPUEnv {
			setDefaultEnvs = false
			cmp := env
			if v >= v2411 {
				cmp = flags
			}
			if st.prevSet && st.prevName == r.name && (st.prevFlags != cmp || st.prevNoGPUEnv != noGPUEnv) {
				return fatal("Invalid GRES record name=%s type=%s: Flags (%s) does not match env flags for previous GRES of same node and name",
					r.name, cNull(r.typ), fs)
			}
			if v < v2411 {
				r.flags |= env
			}
			st.prevSet, st.prevName, st.prevFlags, st.prevNoGPUEnv = true, r.name, cmp, noGPUEnv
		}
	} else if (st.prevFlags != 0 || st.prevNoGPUEnv) && st.prevSet && st.prevName == r.name {
		setDefaultEnvs = false
		if v >= v2411 || !st.prevNoGPUEnv {
			r.flags |= st.prevFlags
		}
	} else if isMPS {
		r.flags |= cfOneSharing
	}
	if setDefaultEnvs && strings.EqualFold(r.name, "gpu") {
		env := cfEnvSet | cfEnvDef
		if v >= v2605 {
			env |= r.flags & cfUUID
		}
		r.flags |= env
		st.prevSet, st.prevName, st.prevFlags, st.prevNoGPUEnv = true, r.name, env, false
	}
	links, ok := get("Link")
	if !ok {
		links, ok = get("Links")
	}
	if ok {
		if msg := validateLinks(links); msg != "" {
			st.p.msgs = append(st.p.msgs, Message{"error", msg},
				Message{"error", fmt.Sprintf("gres.conf: Ignoring invalid Links=%s for Name=%s", links, r.name)})
		} else {
			r.links = links
		}
	}
	if isSharedName(r.name) {
		r.flags |= cfShared
	}
	if cs, ok := get("Count"); ok {
		n, err := parseCount(cs)
		if err != nil {
			return fatal("Invalid GRES record for %s, invalid count %s", r.name, cs)
		}
		if r.count != 0 && r.count != n && r.flags&cfShared == 0 {
			return fatal("Invalid GRES record for %s, count does not match File value", r.name)
		}
		if n >= math.MaxUint64-1 { // NO_VAL64
			return fatal("GRES %s has invalid count value %d", r.name, n)
		}
		r.count = n
	} else if r.count == 0 {
		r.count = 1
	}
	known := false
	for _, t := range st.o.gresTypes {
		if strings.EqualFold(t, r.name) {
			known = true
		}
	}
	if !known {
		st.p.msgs = append(st.p.msgs, Message{"error", "Ignoring gres.conf record, invalid name: " + r.name})
		return nil
	}
	st.p.recs = append(st.p.recs, r)
	return nil
}

// cNull prints a C string as printf("%s") does: "(null)" for none.
func cNull(s string) string {
	if s == "" {
		return "(null)"
	}
	return s
}

func isSharedName(n string) bool { return n == "mps" || n == "shard" }

// validateFiles is _validate_file: every file must exist; a missing one is
// waited for (stock: up to 20 s, once a second) and then fatal.
func (st *parseState) validateFiles(ctx context.Context, expr string, l slurmconf.Line) (int, error) {
	paths, err := hostlist.Expand(expr)
	if err != nil {
		return 0, &ConfError{File: l.File, Line: l.Line, Msg: "can't parse File=" + expr, Err: err}
	}
	for _, p := range paths {
		if err := st.waitFile(ctx, p); err != nil {
			return 0, &ConfError{File: l.File, Line: l.Line, Pre: []string{"error: Waiting for gres.conf file " + p},
				Msg: fmt.Sprintf("can't stat gres.conf file %s: %s", p, errnoText(err)), Err: err}
		}
	}
	return len(paths), nil
}

func (st *parseState) waitFile(ctx context.Context, p string) error {
	exists := st.o.exists
	if exists == nil {
		exists = func(p string) error { _, err := os.Stat(p); return err }
	}
	deadline := time.Now().Add(st.o.fileWait)
	for {
		err := exists(p)
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// checkCores accepts a list of core ids and ranges ("0-3,8") below n.
func checkCores(s string, n uint32) error {
	if n == 0 || s == "" {
		return errors.New("no CPUs")
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return err
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 32); err != nil {
				return err
			}
		}
		if b < a || b >= uint64(n) {
			return errors.New("out of range")
		}
	}
	return nil
}

// validateLinks is gres_links_validate: "" when valid, else the error it logs.
func validateLinks(links string) string {
	if links == "" {
		return "gres_links_validate: Links is an empty string"
	}
	self := -1
	for i, tok := range strings.Split(links, ",") {
		if tok == "" {
			continue // strtok skips empty tokens
		}
		v, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || v < -2 || v > 1024 {
			return fmt.Sprintf("gres_links_validate: Failed to parse token '%s' in links string '%s'", tok, links)
		}
		if v == -1 {
			if self != -1 {
				return fmt.Sprintf("gres_links_validate: links string '%s' has more than one -1", links)
			}
			self = i
		}
	}
	if self == -1 {
		return fmt.Sprintf("gres_links_validate: -1 wasn't found in links string '%s'", links)
	}
	return ""
}

// parseCount is strtoll + suffix_mult of a Count= value.
func parseCount(s string) (uint64, error) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	j := i
	if j < len(s) && (s[j] == '-' || s[j] == '+') {
		j++
	}
	k := j
	for k < len(s) && s[k] >= '0' && s[k] <= '9' {
		k++
	}
	var n int64
	if k > j {
		var err error
		n, err = strconv.ParseInt(s[i:k], 10, 64)
		if err != nil {
			return 0, err // LONG_MIN/LONG_MAX overflow
		}
	} else {
		k = 0 // no digits: strtoll leaves the whole string
	}
	mult, ok := suffixMult(s[k:])
	if !ok {
		return 0, errors.New("bad suffix")
	}
	return uint64(n) * mult, nil
}

func suffixMult(s string) (uint64, bool) {
	switch strings.ToLower(s) {
	case "":
		return 1, true
	case "k", "kib":
		return 1 << 10, true
	case "kb":
		return 1e3, true
	case "m", "mib":
		return 1 << 20, true
	case "mb":
		return 1e6, true
	case "g", "gib":
		return 1 << 30, true
	case "gb":
		return 1e9, true
	case "t", "tib":
		return 1 << 40, true
	case "tb":
		return 1e12, true
	case "p", "pib":
		return 1 << 50, true
	case "pb":
		return 1e15, true
	}
	return 0, false
}

// errnoText is C's %m for err: "No such file or directory".
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		t := errno.Error()
		if t != "" {
			return strings.ToUpper(t[:1]) + t[1:]
		}
	}
	return err.Error()
}
