package gres

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// mergeSystem is the gpu plugin's _merge_system_gres_conf: configured GPUs
// (one record per device) are matched with the detected ones; a match takes
// the detected record (with the configured env flags unless those were
// defaults), a configured GPU with a File and no match stays, detected GPUs
// nobody configured are left out with a warning. GPUs come first, in PCI
// (Links) order, then the other names as they were.
func mergeSystem(n *Node, conf []*rec, sys []*rec) []*rec {
	var single, gpus, other []*rec
	for _, r := range conf {
		if r.count == 0 {
			continue
		}
		if !strings.EqualFold(r.name, "gpu") {
			other = append(other, r)
			continue
		}
		if r.count == 1 {
			single = append(single, r)
			continue
		}
		if r.file == "" {
			for i := uint64(0); i < r.count; i++ {
				c := *r
				c.count = 1
				single = append(single, &c)
			}
			continue
		}
		paths, _ := hostlist.Expand(r.file)
		for _, p := range paths {
			c := *r
			c.count, c.file = 1, p
			single = append(single, &c)
		}
	}
	normalizeTypes(sys, single)
	sort.SliceStable(single, func(i, j int) bool { return fileLess(single[i], single[j]) })
	sort.SliceStable(sys, func(i, j int) bool { return fileLess(sys[i], sys[j]) })
	used := make([]bool, len(sys))  // taken into the final list
	spent := make([]bool, len(sys)) // mismatched: out of this merge, still reported as ignored
	for _, c := range single {
		match := -1
		for i, s := range sys {
			if used[i] || spent[i] || !matchGRES(c, s) {
				continue
			}
			if !cpusLinksMatch(c, s) {
				n.Messages = append(n.Messages, Message{"error", "This GPU specified in [slurm|gres].conf has mismatching Cores or Links from the device found on the system. Ignoring it."})
				spent[i] = true
				match = -2
				break
			}
			match = i
			break
		}
		if match == -2 {
			continue
		}
		if match >= 0 {
			s := sys[match]
			if c.flags&cfEnvDef == 0 {
				s.flags = s.flags&^cfEnvSet | c.flags&cfEnvSet
			}
			if n.version >= v2605 {
				// 26.05 keeps the modifiers written in gres.conf.
				s.flags |= c.flags & (cfExplicit | cfUUID)
			}
			used[match] = true
			gpus = append(gpus, s)
			continue
		}
		if c.file != "" {
			gpus = append(gpus, c)
		} else {
			n.Messages = append(n.Messages, Message{"error", "Discarding the following config-only GPU due to lack of File specification:"})
		}
	}
	var ignored []string
	for i, s := range sys {
		if !used[i] { // mismatched ones too: stock resets and reports them
			ignored = append(ignored, fmt.Sprintf("%s:%s File=%s", s.name, cNull(s.typ), cNull(s.file)))
		}
	}
	if len(ignored) > 0 {
		n.Messages = append(n.Messages, Message{"warning", "The following autodetected GPUs are being ignored: " + strings.Join(ignored, ", ")})
	}
	sort.SliceStable(gpus, func(i, j int) bool { return fileLess(gpus[i], gpus[j]) })
	sort.SliceStable(gpus, func(i, j int) bool { return linksLess(gpus[i], gpus[j]) })
	return append(gpus, other...)
}

// linksLess is _sort_gpu_by_links_order: records with Links first, by the
// position of their -1 (PCI order).
func linksLess(a, b *rec) bool {
	if (a.links == "") != (b.links == "") {
		return a.links != ""
	}
	return linksIndex(a) < linksIndex(b)
}

// normalizeTypes is _normalize_sys_gres_types: a detected type that
// contains an unused configured type (any case; longest types tried
// first) becomes that type; when no configured GPU has a type, detected
// types that match none are dropped.
func normalizeTypes(sys, conf []*rec) {
	if len(conf) == 0 {
		return
	}
	strip := true
	for _, c := range conf {
		if c.typ != "" {
			strip = false
		}
	}
	sort.SliceStable(conf, func(i, j int) bool { return typeLess(conf[i], conf[j]) })
	sort.SliceStable(sys, func(i, j int) bool { return typeLess(sys[i], sys[j]) })
	taken := make([]bool, len(conf))
	for _, s := range sys {
		found := -1
		for i, c := range conf {
			if !taken[i] && c.typ != "" && strings.Contains(strings.ToLower(s.typ), strings.ToLower(c.typ)) {
				found = i
				break
			}
		}
		if found < 0 {
			if strip {
				s.typ = ""
				s.flags &^= cfHasType
			}
			continue
		}
		taken[found] = true
		s.typ = conf[found].typ
	}
}

// typeLess is _sort_gpu_by_type_name: untyped first, then longer types,
// then by name and file.
func typeLess(a, b *rec) bool {
	if (a.typ == "") != (b.typ == "") {
		return a.typ == ""
	}
	if len(a.typ) != len(b.typ) {
		return len(a.typ) > len(b.typ)
	}
	if a.typ != b.typ {
		return a.typ < b.typ
	}
	return fileLess(a, b)
}

// matchGRES is _match_gres: same name, a type and file that agree where
// the configured record names them.
func matchGRES(c, s *rec) bool {
	if c.typ != "" && c.typ != s.typ {
		return false
	}
	if c.file != "" && c.file != s.file {
		return false
	}
	return true
}

// cpusLinksMatch is _validate_cpus_links: configured Cores/Links must be
// what was found; none configured takes the system's.
func cpusLinksMatch(c, s *rec) bool {
	if c.cpus != "" && s.cpus != "" && c.cpus != s.cpus {
		return false
	}
	if c.links != "" && s.links != "" && c.links != s.links {
		return false
	}
	return true
}

// fileLess sorts records by File in natural order (strnatcmp), none last.
func fileLess(a, b *rec) bool {
	if a.file == "" || b.file == "" {
		return a.file != "" && b.file == ""
	}
	return natLess(a.file, b.file)
}

// natLess compares with digit runs as numbers ("nvidia2" < "nvidia10").
func natLess(a, b string) bool {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			i, j := 0, 0
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := strings.TrimLeft(a[:i], "0"), strings.TrimLeft(b[:j], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// linksIndex is the position of -1 in Links (the PCI order); records
// without Links sort first, keeping their order.
func linksIndex(r *rec) int {
	if r.links == "" {
		return -1
	}
	for i, t := range strings.Split(r.links, ",") {
		if t == "-1" {
			return i
		}
	}
	return -1
}
