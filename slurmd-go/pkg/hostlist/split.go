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
