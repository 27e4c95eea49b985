package slurmconf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxIncludeDepth bounds Include recursion (Slurm has no bound and would
// overflow its stack on a cycle).
const maxIncludeDepth = 16

// maxFileSize bounds what we read from one file.
const maxFileSize = 64 << 20

// Load reads and parses the slurm.conf at path as the release of opts
// (at most one Options; none reads as 22.05).
func Load(path string, opts ...Options) (*Config, error) {
	rel, err := newRelease(opts)
	if err != nil {
		return nil, err
	}
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("slurmconf: %w", err)
	}
	return parseData(data, path, rel)
}

// Parse parses slurm.conf text read from r as the release of opts.
// filename names it in errors and anchors relative Include paths and
// PlugStackConfig, as the file slurmd was given.
func Parse(r io.Reader, filename string, opts ...Options) (*Config, error) {
	rel, data, err := readText(r, filename, opts)
	if err != nil {
		return nil, err
	}
	return parseData(data, filename, rel)
}

// readText is Parse's and ParseCgroup's start: the release, then the text
// (bounded).
func readText(r io.Reader, filename string, opts []Options) (release, []byte, error) {
	rel, err := newRelease(opts)
	if err != nil {
		return release{}, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return release{}, nil, fmt.Errorf("slurmconf: read %s: %w", filename, err)
	}
	if len(data) > maxFileSize {
		return release{}, nil, fmt.Errorf("slurmconf: %s: %w: file larger than %d bytes", filename, ErrSyntax, maxFileSize)
	}
	return rel, data, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: file larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}

func parseData(data []byte, filename string, rel release) (*Config, error) {
	p := &parser{
		rel:         rel,
		keys:        topKeys,
		conf:        "slurm.conf",
		topFile:     filename,
		top:         map[string]string{},
		topLine:     map[string]pos{},
		lists:       map[string][]string{},
		nodeDefault: map[string]string{},
		partDefault: map[string]string{},
	}
	if err := p.parseFile(string(data), filename, 0); err != nil {
		return nil, err
	}
	return p.build(filename)
}

// pos is where a value came from.
type pos struct {
	file string
	line int
}

// section is one NodeName/PartitionName/... line: the value of its first
// key, its other keys (lower-cased, last wins) and, for NodeName and
// PartitionName, the DEFAULT values in force when it was read.
type section struct {
	pos
	name string
	keys map[string]string
	dflt map[string]string
}

type parser struct {
	rel  release
	keys keyTable // top-level keys of the file kind
	conf string   // "slurm.conf" or "cgroup.conf", as messages name it
	// ignoreNew is s_p_parse_file's ignore_new (mpi.conf): an unknown key
	// or a line that is no key=value is skipped (slurmd logs it at debug).
	ignoreNew bool
	topFile   string // the file slurmd was given (its SLURM_CONF)
	hash      uint32
	includes  []string
	warnings  []Warning

	top     map[string]string   // top-level scalars, lower-cased keys
	topLine map[string]pos      // where each top key was last set
	lists   map[string][]string // kList keys: every value, in file order

	nodes, parts, downs, sets, fronts, ctlds, powers []section
	nodeDefault, partDefault                         map[string]string
}

func (p *parser) warn(at pos, level, format string, args ...any) {
	p.warnings = append(p.warnings, Warning{File: at.file, Line: at.line, Level: level, Msg: fmt.Sprintf(format, args...)})
}

// parseFile runs s_p_parse_file over one file's text. The first error stops
// parsing (Slurm logs all of them, then refuses the file).
func (p *parser) parseFile(data, file string, depth int) error {
	r := lineReader{data: data, next: 1}
	for {
		ll, ok := r.read(&p.hash)
		if !ok {
			return nil
		}
		if ll.text == "" {
			continue
		}
		if name, rest, ok := includeDirective(ll.text); ok {
			if err := p.include(name, rest, file, ll.line, depth); err != nil {
				return err
			}
			continue
		}
		if err := p.parseLine(ll.text, file, ll.line); err != nil {
			return err
		}
	}
}

// lineReader yields logical lines, folding raw lines into the hash in file
// order so that Include'd files hash in the right place.
type lineReader struct {
	data string
	next int
}

func (r *lineReader) read(hash *uint32) (logicalLine, bool) {
	if r.data == "" {
		return logicalLine{}, false
	}
	start := r.next
	var buf strings.Builder
	for r.data != "" {
		raw := r.data
		if k := strings.IndexByte(r.data, '\n'); k >= 0 {
			raw, r.data = r.data[:k+1], r.data[k+1:]
		} else {
			r.data = ""
		}
		r.next++
		*hash = hashLine(*hash, raw)
		s, cont := stripContinuation(stripComment(raw))
		buf.WriteString(s)
		if !cont {
			break
		}
	}
	return logicalLine{text: stripEscapes(buf.String()), line: start, lines: r.next - start}, true
}

// includeDirective recognises "include <file>" at the very start of a line
// (case-insensitive, no leading blanks, as _parse_include_directive).
func includeDirective(line string) (name, rest string, ok bool) {
	const kw = "include"
	if len(line) <= len(kw) || !strings.EqualFold(line[:len(kw)], kw) || !isSpace(line[len(kw)]) {
		return "", "", false
	}
	s := strings.TrimLeft(line[len(kw):], " \t\n\v\f\r")
	i := 0
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return s[:i], s[i:], true
}

func (p *parser) include(name, rest, file string, line, depth int) error {
	if name == "" {
		return perr(file, line, ErrInclude, "Include needs a file name")
	}
	for strings.Contains(name, "%c") {
		cn, ok := p.top["clustername"]
		if !ok {
			return perr(file, line, ErrInclude, "_parse_for_format: Did not get ClusterName for include path")
		}
		name = strings.Replace(name, "%c", strings.ToLower(cn), 1)
	}
	path := name
	if !filepath.IsAbs(path) {
		// 22.05 resolves against the including file; 24.11 against the
		// file slurmd was given (get_extra_conf_path of SLURM_CONF).
		base := file
		if p.rel.atLeast(V2411) {
			base = p.topFile
		}
		path = filepath.Join(filepath.Dir(base), name)
	}
	if p.rel.atLeast(V2411) && strings.Contains(name, "*") {
		return perr(file, line, ErrInclude, "Slurm does not support glob parsing. %s from %s will be skipped over. If this expected, ignore this message and set DebugFlags=GLOB_SILENCE in your slurm.conf.",
			path, filepath.Base(p.topFile))
	}
	if depth >= maxIncludeDepth {
		return perr(file, line, ErrInclude, "Include %q: nested deeper than %d", path, maxIncludeDepth)
	}
	data, err := readFile(path)
	if err != nil {
		// slurmd retries a missing file for 60 s first; we do not wait.
		return perr(file, line, ErrInclude, "s_p_parse_file: cannot stat file %s: %s", path, strerror(err))
	}
	p.includes = append(p.includes, path)
	if err := p.parseFile(string(data), path, depth+1); err != nil {
		return err
	}
	if !isBlank(rest) {
		return perr(file, line, ErrSyntax, "Parse error in file %s line %d: \"%s\"", file, line, strings.TrimRight(rest, "\r\n"))
	}
	return nil
}

// strerror is C's strerror(errno) text for a failed open or read.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	s := errno.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// parseLine handles one non-include line: exactly one top-level key, or a
// section line whose further keys belong to it.
func (p *parser) parseLine(text, file string, line int) error {
	kv, ok := matchKeyValue(text)
	if !ok {
		if isBlank(text) {
			return nil
		}
		if p.ignoreNew {
			p.warn(pos{file, line}, "debug", "Parse error in file %s line %d: \"%s\"", file, line, strings.TrimRight(text, "\r\n"))
			return nil
		}
		return p.leftover(text, file, line)
	}
	name, k, known := p.keys.lookup(kv.key, p.rel)
	if !known && p.ignoreNew {
		p.warn(pos{file, line}, "debug", "_parse_next_key: Parsing error at unrecognized key: %s", kv.key)
		return nil
	}
	if !known {
		return perr(file, line, ErrUnknownKey, "_parse_next_key: Parsing error at unrecognized key: %s", kv.key)
	}
	lk := strings.ToLower(name)
	at := pos{file, line}
	rest := kv.rest
	switch k {
	case kSection:
		var err error
		rest, err = p.parseSection(name, kv.value, kv.rest, at)
		if err != nil {
			return err
		}
	case kDefunct:
		// _defunct_option: accepted unchecked, nothing stored.
		if p.rel.atLeast(V2411) {
			p.warn(at, "error", "The option \"%s\" is defunct, please remove it from %s.", name, p.conf)
		} else {
			p.warn(at, "error", "The option \"%s\" is defunct, see man slurm.conf.", name)
		}
	case kList:
		p.lists[lk] = append(p.lists[lk], kv.value)
		p.top[lk] = kv.value
		p.topLine[lk] = at
	default:
		if _, dup := p.top[lk]; dup {
			p.warn(at, "error", "%s 1 specified more than once, latest value used", name)
		}
		if err := checkValue(name, k, kv.value); err != nil {
			return perr(file, line, ErrValue, "%v", err)
		}
		p.top[lk] = kv.value
		p.topLine[lk] = at
	}
	if !isBlank(rest) {
		if p.ignoreNew {
			p.warn(at, "debug", "Parse error in file %s line %d: \"%s\"", file, line, strings.TrimRight(rest, "\r\n"))
			return nil
		}
		return p.leftover(rest, file, line)
	}
	return nil
}

// leftover is s_p_parse_file's complaint about text after the last key.
func (p *parser) leftover(rest, file string, line int) error {
	return perr(file, line, ErrSyntax, "Parse error in file %s line %d: \"%s\"", file, line, strings.TrimRight(rest, "\r\n"))
}

// sectionTable returns the key table of a section line.
func sectionTable(key string) keyTable {
	switch key {
	case "NodeName":
		return nodeKeys
	case "PartitionName":
		return partitionKeys
	case "DownNodes":
		return downNodesKeys
	case "NodeSet":
		return nodeSetKeys
	case "FrontendName":
		return frontendKeys
	case "PowerAction":
		return powerActionKeys
	}
	return slurmctldHostKeys
}

// parseSection parses the key=value pairs following NodeName=..., etc.
func (p *parser) parseSection(key, value, rest string, at pos) (string, error) {
	if key == "FrontendName" && p.rel.check(V2205, V2605) {
		// Debian's Slurm is built without front-end support.
		return "", pfatal(at.file, at.line, ErrInvalid, "Use of FrontendName in slurm.conf without Slurm being configured/built with the --enable-front-end option")
	}
	if key == "NodeName" && strings.EqualFold(value, "ALL") {
		return "", pfatal(at.file, at.line, ErrInvalid, "'%s' is a reserved word disallowed for use with NodeName", value)
	}
	table := sectionTable(key)
	keys := map[string]string{}
	for {
		kv, ok := matchKeyValue(rest)
		if !ok {
			break
		}
		name, k, known := table.lookup(kv.key, p.rel)
		if !known {
			return "", perr(at.file, at.line, ErrUnknownKey, "Parsing error at unrecognized key: %s", kv.key)
		}
		lk := strings.ToLower(name)
		if _, dup := keys[lk]; dup {
			p.warn(at, "error", "%s 1 specified more than once, latest value used", name)
		}
		if err := checkValue(name, k, kv.value); err != nil {
			return "", perr(at.file, at.line, ErrValue, "%v", err)
		}
		keys[lk] = kv.value
		rest = kv.rest
	}
	s := section{pos: at, name: value, keys: keys}
	isDefault := strings.EqualFold(value, "DEFAULT")
	switch key {
	case "NodeName":
		if isDefault {
			for _, k := range []string{"NodeHostname", "BcastAddr", "NodeAddr"} {
				if _, ok := keys[strings.ToLower(k)]; ok {
					return "", perr(at.file, at.line, ErrInvalid, "%s not allowed with NodeName=DEFAULT", k)
				}
			}
			p.nodeDefault = mergeDefaults(p.nodeDefault, keys)
			return rest, nil
		}
		s.dflt = p.nodeDefault
		if v, ok := s.get("suspendtime"); ok && p.rel.check(V2605, 0) && !suspendTimeOK(v) {
			return "", perr(at.file, at.line, ErrInvalid, "NodeNames=%s SuspendTime=%s is invalid", value, v)
		}
		// _parse_nodename derives the topology, and complains, right away.
		buildTemplate(&s, func(f string, a ...any) { p.warn(at, "error", f, a...) })
		p.nodes = append(p.nodes, s)
	case "PartitionName":
		if isDefault {
			p.partDefault = mergeDefaults(p.partDefault, keys)
			return rest, nil
		}
		s.dflt = p.partDefault
		p.parts = append(p.parts, s)
	case "DownNodes":
		p.downs = append(p.downs, s)
	case "NodeSet":
		p.sets = append(p.sets, s)
	case "FrontendName":
		p.fronts = append(p.fronts, s)
	case "SlurmctldHost":
		p.ctlds = append(p.ctlds, s)
	case "PowerAction":
		if err := checkPowerAction(&s); err != nil {
			return "", err
		}
		p.powers = append(p.powers, s)
	}
	return rest, nil
}

// checkPowerAction is 26.05 _parse_power_action as slurmd runs it.
func checkPowerAction(s *section) error {
	bad := func(format string, args ...any) error {
		return perr(s.file, s.line, ErrInvalid, format, args...)
	}
	loc, ok := s.keys["location"]
	if !ok || loc == "" {
		return bad("PowerAction '%s' requires Location=slurmctld or Location=slurmd", s.name)
	}
	if !strings.EqualFold(loc, "slurmctld") && !strings.EqualFold(loc, "slurmd") {
		return bad("Invalid Location '%s' for PowerAction '%s', valid values are 'slurmctld' and 'slurmd'", loc, s.name)
	}
	prog, _, _ := strings.Cut(strings.TrimLeft(s.keys["program"], " "), " ")
	if prog == "" {
		return bad("PowerAction '%s' requires Program= with a non-empty path", s.name)
	}
	if strings.EqualFold(loc, "slurmctld") {
		return nil // checked by slurmctld, not by slurmd
	}
	if !filepath.IsAbs(prog) {
		return bad("power_save program %s not absolute pathname", prog)
	}
	fi, err := os.Stat(prog)
	switch {
	case err != nil:
		return bad("power_save program %s not found", prog)
	case fi.Mode().Perm()&0o111 == 0:
		return bad("power_save program %s is not executable", prog)
	case fi.Mode().Perm()&0o022 != 0:
		return bad("power_save program %s has group or world write permission", prog)
	}
	return nil
}

// mergeDefaults is s_p_hashtbl_merge: the new DEFAULT line wins, older
// defaults fill the keys it does not name. A new map is returned so the
// sections that captured the old one keep seeing it.
func mergeDefaults(old, line map[string]string) map[string]string {
	m := make(map[string]string, len(old)+len(line))
	for k, v := range old {
		m[k] = v
	}
	for k, v := range line {
		m[k] = v
	}
	return m
}

// get returns a section key, falling back to the DEFAULT values.
func (s *section) get(key string) (string, bool) {
	if v, ok := s.keys[key]; ok {
		return v, true
	}
	v, ok := s.dflt[key]
	return v, ok
}
