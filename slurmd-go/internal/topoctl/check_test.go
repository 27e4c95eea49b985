package topoctl

import (
	"reflect"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/topoapi"
)

func TestParseJobNodes(t *testing.T) {
	for _, c := range []struct {
		out     string
		nodes   []string
		one, ok bool
	}{
		{"JobId=7 NodeList=n[1-3] Switches=1@00:05:00 BatchFlag=1", []string{"n1", "n2", "n3"}, true, true},
		{"JobId=7 NodeList=n1,n4 Switches=2@00:00:00", []string{"n1", "n4"}, false, true},
		{"JobId=7 NodeList=n2", []string{"n2"}, false, true},
		{"JobId=7 NodeList=(null)", nil, false, false},
		{"JobId=7 BatchFlag=1", nil, false, false},
	} {
		nodes, one, err := parseJobNodes("7", c.out)
		if (err == nil) != c.ok || one != c.one || !reflect.DeepEqual(nodes, c.nodes) {
			t.Errorf("parseJobNodes(%q) = %v, %v, %v; want %v, %v, ok=%v", c.out, nodes, one, err, c.nodes, c.one, c.ok)
		}
	}
}

func TestPlaceByConf(t *testing.T) {
	topo := &topoapi.Topology{Zone: map[string]string{"n1": "za", "n2": "zb", "n3": "za"}}
	got := PlaceByConf([]string{"n1", "n2", "n3", "x9"}, topo)
	zones := Zones(got)
	if !reflect.DeepEqual(zones, map[string][]string{"za": {"n1", "n3"}, "zb": {"n2"}, "-": {"x9"}}) {
		t.Errorf("zones %v", zones)
	}
	if got[3].Pod != "-" || got[3].K8sNode != "-" || got[3].Zone != "-" {
		t.Errorf("unknown node placed as %+v", got[3])
	}
}
