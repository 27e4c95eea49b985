package hostlist

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"single", "n1", []string{"n1"}},
		{"no number", "login", []string{"login"}},
		{"range and item", "n[1-4,7]", []string{"n1", "n2", "n3", "n4", "n7"}},
		{"two groups", "n[1-2],gpu[01-03]", []string{"n1", "n2", "gpu01", "gpu02", "gpu03"}},
		{"padding from low bound", "n[01-3]", []string{"n01", "n02", "n03"}},
		{"no padding from high bound", "n[1-03]", []string{"n1", "n2", "n3"}},
		{"wide padding", "n[001-003]", []string{"n001", "n002", "n003"}},
		{"padding grows past width", "n[98-101]", []string{"n98", "n99", "n100", "n101"}},
		{"bracket only", "[1-3]", []string{"1", "2", "3"}},
		{"lo- means lo", "n[5-]", []string{"n5"}},
		{"separators", "a1 b2\tc3,,d4", []string{"a1", "b2", "c3", "d4"}},
		{"multi dimension", "r[1-2]n[1-3]", []string{"r1n1", "r1n2", "r1n3", "r2n1", "r2n2", "r2n3"}},
		{"three groups, left-most group fastest in the prefix", "a[1-2]b[1-2]c[1-2]",
			[]string{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"}},
		{"rack prefix", "rack[1-2]-n[1-2]", []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
		{"duplicates kept", "n[1,1-3]", []string{"n1", "n1", "n2", "n3"}},
		{"dotted", "n[1-2].cluster", nil}, // last group must end the item
		{"stray close bracket is a name character", "a]b[1,3]", []string{"a]b1", "a]b3"}},
		{"empty", "", []string{}},
		{"max range", "n[1-65536]", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Expand(tc.in)
			switch {
			case tc.name == "dotted":
				if !errors.Is(err, ErrSyntax) {
					t.Fatalf("err = %v, want ErrSyntax", err)
				}
				return
			case tc.name == "max range":
				if err != nil || len(got) != 65536 || got[65535] != "n65536" {
					t.Fatalf("len %d, err %v", len(got), err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestExpand_Errors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"n[1-2", ErrSyntax},
		{"n[1-2]x", ErrSyntax},
		{"n[1-2]]", ErrSyntax},
		{"n[]", ErrSyntax},
		{"n[3-1]", ErrSyntax},
		{"n[-1]", ErrSyntax},
		{"n[1--2]", ErrSyntax},
		{"n[a-b]", ErrSyntax},
		{"n[1-2x]", ErrSyntax},
		{"n[1[2]]", ErrSyntax},
		{"n[1,]", ErrSyntax},
		{"n[99999999999999999999]", ErrSyntax},
		{"n[1-65537]", ErrTooLarge},
		{"n[0-65535],m[0-65535],o[0-65535],p[0-65535],q1", ErrTooLarge},
		{"a[0-65535]b[0-65535]", ErrTooLarge},
		{"a[0-65536]b[1]", ErrTooLarge},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Expand(tc.in)
			if !errors.Is(err, tc.want) {
				t.Errorf("Expand(%q) err = %v, want %v", tc.in, err, tc.want)
			}
			if _, err := Count(tc.in); !errors.Is(err, tc.want) {
				t.Errorf("Count(%q) err = %v, want %v", tc.in, err, tc.want)
			}
		})
	}
}

func TestCompress(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"range", []string{"n1", "n2", "n3", "n7"}, "n[1-3,7]"},
		{"order kept, groups only consecutive", []string{"n1", "m1", "n2"}, "n1,m1,n2"},
		{"padding", []string{"gpu01", "gpu02", "gpu10"}, "gpu[01-02,10]"},
		{"descending not joined", []string{"b10", "b9"}, "b[10,9]"},
		{"singles", []string{"login", "n1"}, "login,n1"},
		{"width change joins", []string{"n9", "n10", "n11"}, "n[9-11]"},
		{"mixed widths", []string{"n1", "n01"}, "n[1,01]"},
		{"duplicates", []string{"n1", "n1"}, "n[1,1]"},
		{"multi dim", []string{"r1n1", "r1n2", "r2n1"}, "r1n[1-2],r2n1"},
		{"numeric name", []string{"1", "2", "3"}, "[1-3]"},
		{"empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Compress(tc.in); got != tc.want {
				t.Errorf("Compress(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestHostlist_FindNthCount(t *testing.T) {
	h, err := Parse("login,n[1-3,7],gpu[01-02],nid0000[2-7]")
	if err != nil {
		t.Fatal(err)
	}
	if h.Count() != 13 {
		t.Errorf("Count = %d", h.Count())
	}
	for _, tc := range []struct {
		name string
		want int
	}{
		{"login", 0}, {"n1", 1}, {"n3", 3}, {"n7", 4}, {"gpu02", 6},
		{"nid00002", 7}, {"nid00007", 12}, // zero padding moved into the prefix
		{"n4", -1}, {"gpu2", -1}, {"n01", -1}, {"x", -1}, {"", -1},
	} {
		if got := h.Find(tc.name); got != tc.want {
			t.Errorf("Find(%q) = %d, want %d", tc.name, got, tc.want)
		}
	}
	hosts := h.Hosts()
	for i, want := range hosts {
		if got, ok := h.Nth(i); !ok || got != want {
			t.Errorf("Nth(%d) = %q, want %q", i, got, want)
		}
	}
	if _, ok := h.Nth(len(hosts)); ok {
		t.Error("Nth past the end")
	}
	if _, ok := h.Nth(-1); ok {
		t.Error("Nth(-1)")
	}
	if n, err := Count("n[1-1000],m1"); err != nil || n != 1001 {
		t.Errorf("Count = %d, %v", n, err)
	}
}

func TestHostlist_PushAndUniq(t *testing.T) {
	h := New("n3", "n1")
	h.Push("n2")
	o, _ := Parse("n[4-5]")
	h.PushList(o)
	if got := h.String(); got != "n[3,1-2,4-5]" {
		t.Errorf("String = %q", got)
	}
	h.Push("n1")
	h.Uniq()
	if got := h.String(); got != "n[1-5]" || h.Count() != 5 {
		t.Errorf("after Uniq: %q (%d)", got, h.Count())
	}
}

func TestSpan(t *testing.T) {
	for _, tc := range []struct {
		total, width int
		want         []int
	}{
		{3, 5, []int{0, 0, 0, 0, 0}},
		{5, 2, []int{2, 1}},
		{5, 4, []int{4, 0, 0, 0}},
		{10, 3, []int{3, 3, 1}},
	} {
		if got := Span(tc.total, tc.width); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Span(%d, %d) = %v, want %v", tc.total, tc.width, got, tc.want)
		}
	}
}

func TestSplit(t *testing.T) {
	hosts, _ := Expand("n[1-10]")
	got := Split(hosts, 3)
	want := [][]string{{"n1", "n2", "n3", "n4"}, {"n5", "n6", "n7", "n8"}, {"n9", "n10"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Split = %q, want %q", got, want)
	}
	if got := Split(hosts[:3], 50); len(got) != 3 {
		t.Errorf("Split below width = %q", got)
	}
	if got := Split(nil, 2); len(got) != 0 {
		t.Errorf("Split(nil) = %q", got)
	}
	// Every host lands in exactly one sub-list, in order, and there are never
	// more sub-lists than the tree width.
	for total := 0; total <= 300; total++ {
		hs := make([]string, total)
		for i := range hs {
			hs[i] = fmt.Sprint("n", i)
		}
		for width := 1; width <= 60; width++ {
			parts := Split(hs, width)
			if len(parts) > width {
				t.Fatalf("total %d width %d: %d sub-lists", total, width, len(parts))
			}
			var flat []string
			for _, p := range parts {
				if len(p) == 0 {
					t.Fatalf("total %d width %d: empty sub-list", total, width)
				}
				flat = append(flat, p...)
			}
			if !reflect.DeepEqual(flat, hs) && total > 0 {
				t.Fatalf("total %d width %d: hosts lost or reordered", total, width)
			}
		}
	}
}

func TestNatCmp(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"a", "b", -1}, {"a2", "a10", -1}, {"a10", "a2", 1}, {"a01", "a1", -1},
		{"x", "x", 0}, {"a b", "ab", 0}, {"", "a", -1}, {"rack1-", "rack10-", -1},
	} {
		if got := natCmp(tc.a, tc.b); sign(got) != tc.want {
			t.Errorf("natCmp(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// scontrol runs the installed Slurm 22.05 scontrol with a minimal config
// (it needs one to start, but no controller for these commands).
func scontrol(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	bin, err := exec.LookPath("scontrol")
	if err != nil {
		t.Fatalf("scontrol (slurm-client 22.05) is required by this test: %v", err)
	}
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=hl\nSlurmctldHost=ctl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// `show hostnames` exits 0 after "Invalid hostlist: ..." on stderr.
	ok := err == nil && !strings.Contains(stderr.String(), "Invalid hostlist")
	return strings.TrimRight(string(out), "\n"), ok
}

var scontrolExprs = []string{
	"n1", "n[1-4,7],gpu[01-16]", "n[001-010]", "r[1-2]n[1-3]", "a[1-2]b[1-2]c[1-2]",
	"n[01-3]", "n[1-03]", "[1-3]", "n[5-]", "n[1,1-3]", "rack[1-2]-n[08-11]",
	"n[98-102],m9", "a1 b2\tc3,,d4", "x[0-2],x[3-5],x7",
	// rejected by both
	"n[1-2]x", "n[]", "n[3-1]", "n[1-2]]", "n[1-65537]", "n[a-b]",
}

func TestExpand_MatchesScontrol(t *testing.T) {
	for _, e := range scontrolExprs {
		t.Run(e, func(t *testing.T) {
			out, ok := scontrol(t, "show", "hostnames", e)
			got, err := Expand(e)
			if !ok {
				if err == nil {
					t.Errorf("scontrol rejects %q, Expand gave %q", e, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("scontrol accepts %q, Expand: %v", e, err)
			}
			if want := strings.Split(out, "\n"); !reflect.DeepEqual(got, want) {
				t.Errorf("Expand(%q) = %q, scontrol %q", e, got, want)
			}
		})
	}
}

// randomHosts makes host lists with shared prefixes, gaps, duplicates,
// mixed padding and names without numbers.
func randomHosts(r *rand.Rand) []string {
	prefixes := []string{"n", "gpu", "rack1-n", "login", "a", "b"}
	hs := make([]string, 1+r.IntN(25))
	for i := range hs {
		p := prefixes[r.IntN(len(prefixes))]
		switch r.IntN(6) {
		case 0:
			hs[i] = p
		case 1:
			hs[i] = fmt.Sprintf("%s%02d", p, r.IntN(15))
		case 2:
			hs[i] = fmt.Sprintf("%s%03d", p, 95+r.IntN(10))
		default:
			hs[i] = fmt.Sprintf("%s%d", p, r.IntN(15))
		}
	}
	if r.IntN(2) == 0 { // a sorted run, the common case
		for i := 1; i < len(hs); i++ {
			hs[i] = fmt.Sprintf("n%d", 3+i)
		}
	}
	return hs
}

func TestCompress_MatchesScontrol(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := [][]string{
		{"n1", "n2", "n3", "n7"}, {"n3", "n1", "n2", "n1"}, {"n9", "n10", "n08"},
		{"gpu01", "gpu02", "a", "b10", "b9", "r1n1", "r1n2", "r2n1"},
		{"n[1-2]"}, // a literal name is not an expression for Compress; see below
	}
	for i := 0; i < 60; i++ {
		cases = append(cases, randomHosts(r))
	}
	for i, hs := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			joined := strings.Join(hs, ",")
			if strings.ContainsAny(joined, "[]") {
				return // scontrol would parse the brackets
			}
			want, ok := scontrol(t, "show", "hostlist", joined)
			if !ok {
				t.Fatalf("scontrol failed for %q", joined)
			}
			if got := Compress(hs); got != want {
				t.Errorf("Compress(%q) = %q, scontrol %q", hs, got, want)
			}
			wantSorted, _ := scontrol(t, "show", "hostlistsorted", joined)
			if got := CompressSorted(hs); got != wantSorted {
				t.Errorf("CompressSorted(%q) = %q, scontrol %q", hs, got, wantSorted)
			}
			if h, err := Expand(want); err != nil || !reflect.DeepEqual(h, hs) {
				t.Errorf("Expand(%q) = %q, %v; want %q", want, h, err, hs)
			}
		})
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range scontrolExprs {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := Expand(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Expand(%q): unexpected error %v", s, err)
			}
			return
		}
		n, err := Count(s)
		if err != nil || n != len(hosts) {
			t.Fatalf("Count(%q) = %d, %v; Expand gave %d", s, n, err, len(hosts))
		}
		c := Compress(hosts)
		back, err := Expand(c)
		if err != nil {
			t.Fatalf("Expand(Compress(Expand(%q))) = Expand(%q): %v", s, c, err)
		}
		if !reflect.DeepEqual(back, hosts) && !(len(back) == 0 && len(hosts) == 0) {
			t.Fatalf("round trip of %q via %q changed the hosts", s, c)
		}
		h, _ := Parse(c)
		for i, name := range hosts {
			if j := h.Find(name); j < 0 || j > i {
				t.Fatalf("Find(%q) = %d in %q, want <= %d", name, j, c, i)
			}
		}
	})
}
