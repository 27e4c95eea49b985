package spawn

import "testing"

// A port is never handed out twice in one process, even once it is free
// again (a daemon down for a restart).
func TestFreePorts_NeverTwice(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 20; i++ {
		ports, err := FreePorts(5, 40000, 40200)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
	if _, err := FreePorts(150, 40000, 40200); err == nil {
		t.Fatal("more ports than the range has left were handed out")
	}
}
