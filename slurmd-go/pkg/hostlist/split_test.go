package hostlist

import (
	"fmt"
	"testing"
)

// TestSplitTree pins 24.11's split (topology/common _set_span) on the
// cases the real-cluster tests and the reference use.
func TestSplitTree(t *testing.T) {
	hosts := func(n int) []string {
		var h []string
		for i := 1; i <= n; i++ {
			h = append(h, fmt.Sprintf("t%d", i))
		}
		return h
	}
	cases := []struct {
		n, width int
		want     []int // branch sizes
		depth    int
	}{
		{1, 2, []int{1}, 1},
		{2, 2, []int{1, 1}, 1},
		{4, 2, []int{2, 2}, 2}, // 22.05 split this 3+1
		{3, 2, []int{2, 1}, 2},
		{7, 2, []int{4, 3}, 3},
		{6, 2, []int{3, 3}, 2},
		{10, 3, []int{4, 3, 3}, 2},
		{50, 50, nil, 1},
	}
	for _, c := range cases {
		got, depth := SplitTree(hosts(c.n), c.width)
		var sizes []int
		total := 0
		for _, b := range got {
			sizes = append(sizes, len(b))
			total += len(b)
		}
		if c.want == nil {
			c.want = make([]int, c.n)
			for i := range c.want {
				c.want[i] = 1
			}
		}
		if fmt.Sprint(sizes) != fmt.Sprint(c.want) || depth != c.depth || total != c.n {
			t.Errorf("SplitTree(%d, %d) = sizes %v depth %d, want %v depth %d", c.n, c.width, sizes, depth, c.want, c.depth)
		}
	}
}
