package slurmconf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxIncludeDepth bounds Include recursion (Slurm has no bound and would
// overflow its stack on a cycle).
const maxIncludeDepth = 16

// maxFileSize bounds what we read from one file.
const maxFileSize = 64 << 20

// Load reads and parses the slurm.conf at path.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("slurmconf: %w", err)
	}
	return parseData(data, path)
}

// Parse parses slurm.conf text read from r. filename names it in errors and
// anchors relative Include paths (its directory) and PlugStackConfig.
func Parse(r io.Reader, filename string) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("slurmconf: read %s: %w", filename, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("slurmconf: %s: %w: file larger than %d bytes", filename, ErrSyntax, maxFileSize)
	}
	return parseData(data, filename)
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

func parseData(data []byte, filename string) (*Config, error) {
	p := &parser{
		top:         map[string]string{},
		topLine:     map[string]pos{},
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
	hash     uint32
	includes []string

	top     map[string]string // top-level scalars, lower-cased keys
	topLine map[string]pos

	nodes, parts, downs, sets, fronts, ctlds []section
	nodeDefault, partDefault                 map[string]string
}

// parseFile runs s_p_parse_file over one file's text. The first error stops
// parsing (Slurm reports all of them, then refuses the file).
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
			return perr(file, line, ErrInclude, "Include %q: %%c needs ClusterName to be set before it", name)
		}
		name = strings.Replace(name, "%c", strings.ToLower(cn), 1)
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(file), name)
	}
	if depth >= maxIncludeDepth {
		return perr(file, line, ErrInclude, "Include %q: nested deeper than %d", path, maxIncludeDepth)
	}
	data, err := readFile(path)
	if err != nil {
		return &ParseError{File: file, Line: line, Msg: fmt.Sprintf("Include %q failed: %v", path, err), Err: ErrInclude}
	}
	p.includes = append(p.includes, path)
	if err := p.parseFile(string(data), path, depth+1); err != nil {
		return err
	}
	if !isBlank(rest) {
		return perr(file, line, ErrSyntax, "Parse error: %q", strings.TrimRight(rest, "\r\n"))
	}
	return nil
}

// parseLine handles one non-include line: exactly one top-level key, or a
// section line whose further keys belong to it.
func (p *parser) parseLine(text, file string, line int) error {
	kv, ok := matchKeyValue(text)
	if !ok {
		if isBlank(text) {
			return nil
		}
		return perr(file, line, ErrSyntax, "Parse error: %q", strings.TrimRight(text, "\r\n"))
	}
	lk := strings.ToLower(kv.key)
	ki, known := topKeys[lk]
	if !known {
		return perr(file, line, ErrUnknownKey, "Parsing error at unrecognized key: %s", kv.key)
	}
	at := pos{file, line}
	rest := kv.rest
	switch ki.kind {
	case kArray:
		var err error
		rest, err = p.parseSection(ki.name, kv.value, kv.rest, at)
		if err != nil {
			return err
		}
	case kDefunct:
		// accepted and ignored, as slurmctld does ("option is defunct")
	default:
		if err := checkValue(ki, kv.value); err != nil {
			return perr(file, line, ErrValue, "%v", err)
		}
		p.top[lk] = kv.value
		p.topLine[lk] = at
	}
	if !isBlank(rest) {
		return perr(file, line, ErrSyntax, "Parse error: %q", strings.TrimRight(rest, "\r\n"))
	}
	return nil
}

// parseSection parses the key=value pairs following NodeName=..., etc.
func (p *parser) parseSection(key, value, rest string, at pos) (string, error) {
	var table map[string]keyInfo
	switch key {
	case "NodeName":
		table = nodeKeys
	case "PartitionName":
		table = partitionKeys
	case "DownNodes":
		table = downNodesKeys
	case "NodeSet":
		table = nodeSetKeys
	case "FrontendName":
		table = frontendKeys
	case "SlurmctldHost":
		table = slurmctldHostKeys
	}
	keys := map[string]string{}
	for {
		kv, ok := matchKeyValue(rest)
		if !ok {
			break
		}
		lk := strings.ToLower(kv.key)
		ki, known := table[lk]
		if !known {
			return "", perr(at.file, at.line, ErrUnknownKey, "%s=%s: Parsing error at unrecognized key: %s", key, value, kv.key)
		}
		if err := checkValue(ki, kv.value); err != nil {
			return "", perr(at.file, at.line, ErrValue, "%s=%s: %v", key, value, err)
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
		if strings.EqualFold(value, "ALL") {
			return "", perr(at.file, at.line, ErrInvalid, "'%s' is a reserved word disallowed for use with NodeName", value)
		}
		s.dflt = p.nodeDefault
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
	}
	return rest, nil
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
