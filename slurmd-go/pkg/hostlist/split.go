package hostlist

// Split divides hosts into the sub-lists a message is forwarded to, exactly
// as route/default does (route_split_hostlist_treewidth with set_span in
// src/common/slurm_protocol_api.c): at most width sub-lists; the first host
// of each is contacted directly and forwards to the rest. With
// len(hosts) <= width every host gets its own sub-list. width 0 means
// Slurm's default TreeWidth, 50.
func Split(hosts []string, width int) [][]string {
	if width <= 0 {
		width = 50
	}
	if width > 0xffff { // TreeWidth is a uint16 in Slurm
		width = 0xffff
	}
	span := Span(len(hosts), width)
	var out [][]string
	for i, k := 0, 0; i < len(hosts); k++ {
		extra := 0
		if k < len(span) {
			extra = span[k]
		}
		end := min(i+1+extra, len(hosts))
		out = append(out, hosts[i:end:end])
		i = end
	}
	return out
}

// Span is set_span: span[i] is how many hosts sub-list i carries besides
// its first one. All zero when total <= width.
func Span(total, width int) []int {
	span := make([]int, width)
	if total <= width {
		return span
	}
	left := total
	for left > 0 {
		for i := 0; i < width; i++ {
			if width-i >= left {
				if span[i] != 0 {
					span[i] += left
				}
				left = 0
				break
			} else if left <= width {
				if span[i] == 0 {
					left--
				}
				span[i] += left
				left = 0
				break
			}
			if span[i] == 0 {
				left--
			}
			span[i] += width
			left -= width
		}
	}
	return span
}

// SplitTree divides hosts as 24.11 and later do (hostlist_split_treewidth:
// topology/common _set_span): at most width branches, filled level by
// level, each level width times the one above, the last level's nodes
// spread evenly with the remainder on the first branches. depth is the
// number of levels below the caller (1 when every host is its own branch),
// which 24.11+ puts in the forward header's tree_depth.
func SplitTree(hosts []string, width int) (branches [][]string, depth int) {
	if width <= 0 {
		width = 50
	}
	if width > 0xffff {
		width = 0xffff
	}
	if len(hosts) == 0 {
		return nil, 0
	}
	if len(hosts) <= width {
		for i := range hosts {
			branches = append(branches, hosts[i:i+1:i+1])
		}
		return branches, 1
	}
	span := make([]int, width) // hosts per branch, its first one included
	left := len(hosts)
	for branchCap, levelCap := 1, width; left > 0; branchCap, levelCap = branchCap*width, levelCap*width {
		if levelCap <= left {
			for i := range span {
				span[i] += branchCap
			}
			left -= levelCap
		} else {
			per := left / width
			for i := range span {
				span[i] += per
			}
			left -= per * width
			for i := 0; left > 0; i, left = i+1, left-1 {
				span[i]++
			}
		}
		depth++
	}
	for i, k := 0, 0; i < len(hosts) && k < width; k++ {
		end := min(i+span[k], len(hosts))
		if end > i {
			branches = append(branches, hosts[i:end:end])
		}
		i = end
	}
	return branches, depth
}
