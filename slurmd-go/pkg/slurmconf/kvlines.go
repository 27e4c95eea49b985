package slurmconf

import (
	"path/filepath"
	"strings"
)

// Line is one logical line of a key=value file (after comments,
// continuations and escapes, Include lines expanded in place), for readers
// of files whose keys slurmconf does not own (gres.conf: pkg/gres).
type Line struct {
	File string // the file it came from (an Include'd file names itself)
	Line int    // first physical line, 1-based
	Text string
}

// ReadLines reads path the way s_p_parse_file splits it into lines for the
// release of opts, following "Include <file>" lines (22.05 resolves a
// relative name against the including file, 24.11 on against path; 24.11
// refuses globs). fatal is the line slurmd logs when the file is refused
// ("error opening/reading %s" for gres.conf); it fills ParseError.Fatal.
// Blank lines are dropped.
func ReadLines(path, fatal string, opts ...Options) ([]Line, error) {
	rel, err := newRelease(opts)
	if err != nil {
		return nil, err
	}
	data, err := readFile(path)
	if err != nil {
		return nil, &ParseError{File: path, Msg: "s_p_parse_file: unable to read \"" + path + "\": " + strerror(err), Fatal: fatal, Err: ErrInclude}
	}
	var out []Line
	err = readLines(&out, string(data), path, path, fatal, rel, 0)
	return out, err
}

func readLines(out *[]Line, data, file, top, fatal string, rel release, depth int) error {
	var hash uint32 // unused: gres.conf is not hashed
	r := lineReader{data: data, next: 1}
	for {
		ll, ok := r.read(&hash)
		if !ok {
			return nil
		}
		if isBlank(ll.text) {
			continue
		}
		name, rest, ok := includeDirective(ll.text)
		if !ok {
			*out = append(*out, Line{File: file, Line: ll.line, Text: ll.text})
			continue
		}
		fail := func(format string, args ...any) error {
			e := perr(file, ll.line, ErrInclude, format, args...)
			e.Fatal = fatal
			return e
		}
		if name == "" {
			return fail("Include needs a file name")
		}
		p := name
		if !filepath.IsAbs(p) {
			base := file
			if rel.atLeast(V2411) {
				base = top
			}
			p = filepath.Join(filepath.Dir(base), name)
		}
		if rel.atLeast(V2411) && strings.Contains(name, "*") {
			return fail("Slurm does not support glob parsing. %s from %s will be skipped over.", p, filepath.Base(top))
		}
		if depth >= maxIncludeDepth {
			return fail("Include %q: nested deeper than %d", p, maxIncludeDepth)
		}
		inc, err := readFile(p)
		if err != nil {
			return fail("s_p_parse_file: cannot stat file %s: %s", p, strerror(err))
		}
		if err := readLines(out, string(inc), p, top, fatal, rel, depth+1); err != nil {
			return err
		}
		if !isBlank(rest) {
			e := perr(file, ll.line, ErrSyntax, "Parse error in file %s line %d: \"%s\"", file, ll.line, strings.TrimRight(rest, "\r\n"))
			e.Fatal = fatal
			return e
		}
	}
}

// NextKeyValue matches one key=value pair at the start of s (blanks before
// it allowed; a value may be double-quoted), as parse_config.c's
// keyvalue_pattern: ok is false when s starts with none. rest follows the
// value.
func NextKeyValue(s string) (key, value, rest string, ok bool) {
	kv, ok := matchKeyValue(s)
	if !ok || kv.op != "" {
		return "", "", s, false
	}
	return kv.key, kv.value, kv.rest, true
}

// IsBlank reports whether s holds only C isspace bytes.
func IsBlank(s string) bool { return isBlank(s) }
