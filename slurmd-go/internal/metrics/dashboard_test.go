package metrics

import (
	"context"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/tiee-hpc/tiee/dashboards"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// metricName matches the series names the dashboard may use: ours and
// dcgm-exporter's.
var metricName = regexp.MustCompile(`\b(?:DCGM_FI_[A-Z0-9_]+|slurmd_go_[a-z0-9_]+)\b`)

// TestDashboard_NamesExported: every series a panel of the shipped
// dashboard queries is one this package exports, with every label the
// query filters or groups on, so that a rename here breaks this test and
// not the dashboard.
func TestDashboard_NamesExported(t *testing.T) {
	all := map[Field]float64{}
	for _, f := range Fields() {
		all[f] = 1
	}
	s := &fakeSampler{gpus: []GPU{{Index: 0, Minor: 0, UUID: "GPU-a", Values: all}}}
	m, _ := newTest(t, Options{Sampler: s, Steps: &fakeSteps{}, Conns: fakeConns{}})
	m.Jobs.StepStarted(StepStart{JobID: 1, StepID: 0, User: "u", GPUs: []int{0}})
	m.RPC.ObserveRPC(rpc.Observation{Version: slurmproto.Version2205, MsgType: slurmproto.RequestPing, Result: rpc.ResultOK})
	m.Tick(context.Background())
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]bool{}
	for _, mf := range mfs {
		names := []string{mf.GetName()}
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			names = append(names, mf.GetName()+"_bucket", mf.GetName()+"_sum", mf.GetName()+"_count")
		}
		ls := map[string]bool{"instance": true, "job": true} // added by Prometheus at scrape
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				ls[l.GetName()] = true
			}
		}
		for _, n := range names {
			labels[n] = ls
			if strings.HasSuffix(n, "_bucket") {
				labels[n]["le"] = true
			}
		}
	}
	qs, err := dashboards.Queries(dashboards.SlurmdGo)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		names := metricName.FindAllString(q.Expr, -1)
		if len(names) == 0 {
			t.Errorf("%s/%s: names no series: %s", q.Panel, q.RefID, q.Expr)
		}
		for _, n := range names {
			ls, ok := labels[n]
			if !ok {
				t.Errorf("%s/%s: %s is not exported", q.Panel, q.RefID, n)
				continue
			}
			for _, l := range queryLabels(q.Expr) {
				if !ls[l] && !usedByOther(q.Expr, n, l, labels) {
					t.Errorf("%s/%s: %s has no label %q", q.Panel, q.RefID, n, l)
				}
			}
		}
	}
}

var (
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
)

// queryLabels are the labels a query groups by or matches on.
func queryLabels(expr string) []string {
	var out []string
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	for _, mm := range matcher.FindAllStringSubmatch(expr, -1) {
		out = append(out, mm[1])
	}
	return out
}

// usedByOther: a query over several series may group on a label only one
// of them has.
func usedByOther(expr, name, label string, labels map[string]map[string]bool) bool {
	for _, n := range metricName.FindAllString(expr, -1) {
		if n != name && labels[n][label] {
			return true
		}
	}
	return false
}
