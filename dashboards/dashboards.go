package dashboards

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

// SlurmdGo is slurmd-go.json.
//
//go:embed slurmd-go.json
var SlurmdGo []byte

// Query is one panel target.
type Query struct {
	Row   string // the title of the row the panel is under ("" above the first)
	Panel string // the panel's title
	RefID string
	Expr  string // PromQL with Grafana's variables ($instance, $__rate_interval)
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// Queries reads every panel target of a dashboard, in panel order. A
// panel without a query, or a query without PromQL, is an error naming it.
func Queries(dashboard []byte) ([]Query, error) {
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("dashboards: %w", err)
	}
	var out []Query
	row := ""
	var walk func(ps []panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if len(p.Targets) == 0 {
				return fmt.Errorf("dashboards: panel %d %q has no query", p.ID, p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("dashboards: panel %d %q target %s has no expression", p.ID, p.Title, t.RefID)
				}
				out = append(out, Query{Row: row, Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

// Expand replaces Grafana's variables in a query for a direct Prometheus
// query: every node ($instance) and rateInterval for $__rate_interval.
func Expand(expr, rateInterval string) string {
	return strings.NewReplacer("$__rate_interval", rateInterval, "${instance}", ".+", "$instance", ".+").Replace(expr)
}
