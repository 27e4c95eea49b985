package envarray

import (
	"slices"
	"strings"
	"testing"
)

func TestEnv_Semantics(t *testing.T) {
	e := Env{"A=1", "B=2", "A=3", "NOEQ", "AB=4"}
	if v, ok := e.Get("A"); !ok || v != "1" {
		t.Errorf("Get(A) = %q %v", v, ok)
	}
	if _, ok := e.Get("NOEQ"); ok {
		t.Error("entry without = found")
	}
	e.Overwrite("A", "x")
	e.Append("B", "no")
	e.Append("C", "5")
	if want := (Env{"A=x", "B=2", "A=3", "NOEQ", "AB=4", "C=5"}); !slices.Equal(e, want) {
		t.Errorf("after overwrite/append: %q", e)
	}
	if got, want := e.Copy(), (Env{"A=3", "B=2", "AB=4", "C=5"}); !slices.Equal(got, want) {
		t.Errorf("Copy = %q, want %q", got, want)
	}
	e.Unset("A")
	if want := (Env{"B=2", "NOEQ", "AB=4", "C=5"}); !slices.Equal(e, want) {
		t.Errorf("Unset: %q", e)
	}
	long := strings.Repeat("v", MaxStrlen)
	if e.Setenvf("L", long) {
		t.Error("setenvf accepted an entry of MAX_ENV_STRLEN")
	}
}

// TestMerge: entries without '=' or with a name over NameMax are dropped;
// the rest overwrite in place or join at the end, e itself unchanged.
func TestMerge(t *testing.T) {
	e := Env{"A=1", "B=2"}
	got := e.Merge([]string{"B=x", "NOEQ", strings.Repeat("n", NameMax) + "=v", "C=3"})
	if want := (Env{"A=1", "B=x", "C=3"}); !slices.Equal(got, want) {
		t.Errorf("Merge = %q, want %q", got, want)
	}
	if !slices.Equal(e, Env{"A=1", "B=2"}) {
		t.Errorf("Merge changed its receiver: %q", e)
	}
}
