package dashboards

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSlurmdGo_Shape: the dashboard is valid JSON with a Prometheus data
// source variable, unique panel ids, panels that do not overlap, and at
// least the panels the issue asks for.
func TestSlurmdGo_Shape(t *testing.T) {
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name, Type string
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				Type, UID string
			} `json:"datasource"`
			GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(SlurmdGo, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" {
		t.Fatal("no uid")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Fatalf("variables %v, want datasource and instance", vars)
	}
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		titles[p.Title] = true
		if p.Type != "row" && (p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}") {
			t.Errorf("panel %q: data source %+v, want the prometheus ${datasource} variable", p.Title, p.Datasource)
		}
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: grid %+v", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if o, ok := cells[[2]int{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap at %d,%d", o, p.Title, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
	}
	for _, want := range []string{"GPU utilisation per job", "Idle allocated GPUs", "XID errors", "RPC rate by message type", "RPC latency (p50, p99)"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// TestQueries: every panel has PromQL whose brackets and quotes balance
// and which filters on the instance variable.
func TestQueries(t *testing.T) {
	qs, err := Queries(SlurmdGo)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 10 {
		t.Fatalf("%d queries", len(qs))
	}
	for _, q := range qs {
		if !strings.Contains(q.Expr, `instance=~"$instance"`) {
			t.Errorf("%s/%s: %s does not filter on $instance", q.Panel, q.RefID, q.Expr)
		}
		if err := balanced(q.Expr); err != "" {
			t.Errorf("%s/%s: %s: %s", q.Panel, q.RefID, q.Expr, err)
		}
		if e := Expand(q.Expr, "1m"); strings.Contains(e, "$") {
			t.Errorf("%s/%s: variables left after Expand: %s", q.Panel, q.RefID, e)
		}
	}
}

func TestQueries_Bad(t *testing.T) {
	for name, js := range map[string]string{
		"not json":       `{`,
		"no query":       `{"panels":[{"id":1,"type":"timeseries","title":"x"}]}`,
		"empty expr":     `{"panels":[{"id":1,"type":"timeseries","title":"x","targets":[{"refId":"A","expr":" "}]}]}`,
		"in a collapsed": `{"panels":[{"id":1,"type":"row","title":"r","panels":[{"id":2,"type":"stat","title":"y"}]}]}`,
	} {
		if _, err := Queries([]byte(js)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// balanced checks (), [], {} and double quotes outside strings.
func balanced(s string) string {
	var stack []rune
	pair := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inStr := false
	for _, r := range s {
		switch {
		case inStr:
			if r == '"' {
				inStr = false
			}
		case r == '"':
			inStr = true
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pair[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pair[r] {
				return "unbalanced " + string(r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inStr {
		return "unterminated string"
	}
	if len(stack) > 0 {
		return "unclosed " + string(stack[len(stack)-1])
	}
	return ""
}
