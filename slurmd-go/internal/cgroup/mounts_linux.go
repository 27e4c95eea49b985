package cgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Hierarchies are the cgroup mounts of a host.
type Hierarchies struct {
	// V2 is the cgroup2 mount point ("" if none). On a hybrid host it is
	// /sys/fs/cgroup/unified and usually has no controllers.
	V2 string
	// V1 maps each v1 controller ("memory", "freezer", "pids", ...) to
	// its mount point.
	V1 map[string]string
}

// V2Controllers lists the controllers the v2 hierarchy offers at its root.
func (h Hierarchies) V2Controllers() []string {
	if h.V2 == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(h.V2, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// Mounts reads mountinfo ("" = /proc/self/mountinfo).
func Mounts(mountinfo string) (Hierarchies, error) {
	if mountinfo == "" {
		mountinfo = "/proc/self/mountinfo"
	}
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return Hierarchies{}, fmt.Errorf("cgroup: %w", err)
	}
	return parseMountinfo(b), nil
}

func parseMountinfo(b []byte) Hierarchies {
	h := Hierarchies{V1: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 > len(f) {
			continue
		}
		mnt := unescapeMount(f[4])
		switch f[sep+1] {
		case "cgroup2":
			if h.V2 == "" {
				h.V2 = mnt
			}
		case "cgroup":
			for _, o := range strings.Split(f[sep+3], ",") {
				switch o {
				case "rw", "ro", "":
					continue
				}
				if strings.HasPrefix(o, "name=") || strings.Contains(o, "=") {
					continue
				}
				if _, ok := h.V1[o]; !ok {
					h.V1[o] = mnt
				}
			}
		}
	}
	return h
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// New probes the host and returns the Manager to use: v2 when the unified
// hierarchy offers the memory controller or no v1 freezer/memory
// controller is mounted; else v1 when freezer or memory is mounted; else
// None.
func New(o Options) (Manager, error) {
	h, err := Mounts(o.Mountinfo)
	if err != nil {
		return None{}, err
	}
	switch h.version() {
	case 2:
		return NewV2(h.V2, o.root())
	case 1:
		return NewV1(h.V1, o.root())
	}
	return None{}, nil
}

// version is the hierarchy New uses: 2, 1, or 0 for none.
func (h Hierarchies) version() int {
	_, v1mem := h.V1["memory"]
	_, v1frz := h.V1["freezer"]
	hasMem := false
	for _, c := range h.V2Controllers() {
		if c == "memory" {
			hasMem = true
		}
	}
	switch {
	case h.V2 != "" && (hasMem || (!v1mem && !v1frz)):
		return 2
	case v1mem || v1frz:
		return 1
	}
	return 0
}

// Used are the mount points New's Manager writes: the v2 hierarchy, or
// the v1 freezer and memory controllers.
func (h Hierarchies) Used() []string {
	switch h.version() {
	case 2:
		return []string{h.V2}
	case 1:
		var out []string
		for _, c := range []string{"freezer", "memory"} {
			if m, ok := h.V1[c]; ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}
