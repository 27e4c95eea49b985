package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Mem says what a process's resident memory is made of, from /proc/<pid>/smaps. RSS alone
// hides the difference between heap and stacks (anonymous: the process's own cost) and
// pages of executable files mapped from the page cache (file-backed: shared with every
// process that maps the same file, and dropped by the kernel under memory pressure).
type Mem struct {
	RSSKB     int64 `json:"rss_kb"`
	AnonKB    int64 `json:"anon_kb"`    // anonymous pages: heap, stacks, runtime metadata
	FileKB    int64 `json:"file_kb"`    // file-backed pages: executables, libraries
	PSSKB     int64 `json:"pss_kb"`     // proportional set size: shared pages divided by sharers
	PrivateKB int64 `json:"private_kb"` // pages no other process maps (USS)
	// Files are the file-backed pages per mapped file, largest first.
	Files []FileRSS `json:"files,omitempty"`
}

// FileRSS is the resident part of one mapped file.
type FileRSS struct {
	Path  string `json:"path"`
	RSSKB int64  `json:"rss_kb"`
	// SizeKB is the size of its mappings: how much of the file could be resident.
	SizeKB int64 `json:"mapped_kb"`
}

// ReadMem reads pid's memory breakdown.
func ReadMem(pid int) (Mem, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return Mem{}, err
	}
	defer f.Close()
	return parseSmaps(f)
}

func parseSmaps(f io.Reader) (Mem, error) {
	var m Mem
	files := map[string]*FileRSS{}
	var cur *FileRSS // the file of the mapping being read (nil: anonymous or special)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if isMappingHeader(line) {
			cur = nil
			fields := strings.Fields(string(line))
			if len(fields) >= 6 && strings.HasPrefix(fields[5], "/") {
				path := strings.Join(fields[5:], " ")
				if cur = files[path]; cur == nil {
					cur = &FileRSS{Path: path}
					files[path] = cur
				}
				if lo, hi, ok := parseRange(fields[0]); ok {
					cur.SizeKB += int64(hi-lo) / 1024
				}
			}
			continue
		}
		key, kb, ok := smapsField(line)
		if !ok {
			continue
		}
		switch key {
		case "Rss":
			m.RSSKB += kb
			if cur != nil {
				cur.RSSKB += kb
			}
		case "Anonymous":
			m.AnonKB += kb
		case "Pss":
			m.PSSKB += kb
		case "Private_Clean", "Private_Dirty":
			m.PrivateKB += kb
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("procstat: smaps: %w", err)
	}
	m.FileKB = m.RSSKB - m.AnonKB
	for _, fr := range files {
		if fr.RSSKB > 0 {
			m.Files = append(m.Files, *fr)
		}
	}
	sort.Slice(m.Files, func(i, j int) bool {
		if m.Files[i].RSSKB != m.Files[j].RSSKB {
			return m.Files[i].RSSKB > m.Files[j].RSSKB
		}
		return m.Files[i].Path < m.Files[j].Path
	})
	return m, nil
}

// isMappingHeader: "start-end perms offset dev inode [path]"; field lines start with a
// capitalised key and a colon.
func isMappingHeader(line []byte) bool {
	i := bytes.IndexByte(line, ' ')
	return i > 0 && bytes.IndexByte(line[:i], '-') > 0 && bytes.IndexByte(line[:i], ':') < 0
}

func parseRange(s string) (lo, hi uint64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(a, 16, 64)
	hi, err2 := strconv.ParseUint(b, 16, 64)
	return lo, hi, err1 == nil && err2 == nil && hi >= lo
}

// smapsField parses "Key:   123 kB".
func smapsField(line []byte) (string, int64, bool) {
	k, v, found := bytes.Cut(line, []byte{':'})
	if !found {
		return "", 0, false
	}
	fields := bytes.Fields(v)
	if len(fields) != 2 || string(fields[1]) != "kB" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil {
		return "", 0, false
	}
	return string(k), n, true
}
