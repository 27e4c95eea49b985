package authslurm

import (
	"encoding/json"
	"testing"
)

func TestIdentity_Grant(t *testing.T) {
	for _, id := range []*Identity{
		{Name: "root", Gecos: "root", Dir: "/root", Shell: "/bin/bash", GIDs: []uint32{0}},
		{Name: "a", GIDs: []uint32{100, 5, 27}, GroupNames: []string{"users", "tty", "sudo"}},
		{Name: "nogroups"},
	} {
		raw := appendJSON(nil, id.grant())
		got, err := parseIdentity(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		// "groups" is written sorted by name, so the order of the pairs is
		// the names' order.
		byName := map[string]uint32{}
		for i, n := range got.GroupNames {
			byName[n] = got.GIDs[i]
		}
		for i, n := range id.GroupNames {
			if byName[n] != id.GIDs[i] {
				t.Fatalf("group %s: %d, want %d (%s)", n, byName[n], id.GIDs[i], raw)
			}
		}
		if id.GroupNames == nil && len(got.GIDs) != len(id.GIDs) {
			t.Fatalf("gids %v, want %v", got.GIDs, id.GIDs)
		}
		if got.Name != id.Name || got.Dir != id.Dir || got.Shell != id.Shell || got.Gecos != id.Gecos {
			t.Fatalf("%+v, want %+v", got, id)
		}
	}
	for _, bad := range []string{`[]`, `{"gids":["x"]}`, `{"groups":{"g":1.5}}`, `{"groups":[1]}`} {
		if _, err := parseIdentity(json.RawMessage(bad)); err == nil {
			t.Errorf("parseIdentity(%s) accepted", bad)
		}
	}
}

func TestLookupIdentity_Root(t *testing.T) {
	id, err := LookupIdentity(0, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "root" || id.Dir != "/root" || id.Shell == "" || id.GIDs[0] != 0 || id.GroupNames[0] != "root" {
		t.Fatalf("%+v", id)
	}
	if _, err := LookupIdentity(4000000000, 1, false); err == nil {
		t.Fatal("identity for a uid nobody has")
	}
}
