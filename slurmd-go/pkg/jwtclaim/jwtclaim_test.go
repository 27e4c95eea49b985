package jwtclaim

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestInt: only a plain JSON integer is one, as jansson's json_is_integer.
func TestInt(t *testing.T) {
	for raw, want := range map[string]int64{"0": 0, "-7": -7, "1700000000": 1700000000} {
		if n, err := Int(json.RawMessage(raw)); err != nil || n != want {
			t.Errorf("Int(%s) = %d, %v; want %d", raw, n, err, want)
		}
	}
	for _, raw := range []string{"", "1.0", "1e3", `"5"`, "true", "null"} {
		if n, err := Int(json.RawMessage(raw)); err == nil {
			t.Errorf("Int(%q) = %d, want an error", raw, n)
		}
	}
	if _, err := Uint32(json.RawMessage("4294967296")); err == nil {
		t.Error("Uint32 took 2^32")
	}
	if _, err := Uint32(json.RawMessage("-1")); err == nil {
		t.Error("Uint32 took -1")
	}
	if n, err := Uint32(json.RawMessage("4294967295")); err != nil || n != 4294967295 {
		t.Errorf("Uint32(2^32-1) = %d, %v", n, err)
	}
}

func TestParseIdentity(t *testing.T) {
	t.Run("groups keep the JSON's order and win over gids", func(t *testing.T) {
		id, err := ParseIdentity(json.RawMessage(`{"name":"alice","gecos":"","dir":"/home/alice","shell":7,"gids":[1],"groups":{"users":100,"adm":4}}`))
		if err != nil {
			t.Fatal(err)
		}
		if id.Name == nil || *id.Name != "alice" || id.Gecos == nil || *id.Gecos != "" || id.Shell != nil {
			t.Fatalf("names %v %v %v: want alice, an empty gecos, and no shell for a number", id.Name, id.Gecos, id.Shell)
		}
		if !slices.Equal(id.GroupNames, []string{"users", "adm"}) || !slices.Equal(id.GIDs, []uint32{100, 4}) {
			t.Fatalf("groups %v %v", id.GroupNames, id.GIDs)
		}
	})
	t.Run("gids", func(t *testing.T) {
		id, err := ParseIdentity(json.RawMessage(`{"gids":[100,4]}`))
		if err != nil || id.GroupNames != nil || !slices.Equal(id.GIDs, []uint32{100, 4}) || id.Name != nil {
			t.Fatalf("%+v, %v", id, err)
		}
	})
	t.Run("an empty groups object", func(t *testing.T) {
		id, err := ParseIdentity(json.RawMessage(`{"groups":{}}`))
		if err != nil || id.GroupNames == nil || len(id.GroupNames) != 0 {
			t.Fatalf("%+v, %v: want empty, non-nil group names", id, err)
		}
	})
	for _, raw := range []string{`[1]`, `{"gids":["1"]}`, `{"gids":[1.5]}`, `{"groups":[1]}`, `{"groups":{"a":"1"}}`, `{"groups":{"a":-1}}`} {
		if id, err := ParseIdentity(json.RawMessage(raw)); err == nil {
			t.Errorf("ParseIdentity(%s) = %+v, want an error", raw, id)
		}
	}
}
