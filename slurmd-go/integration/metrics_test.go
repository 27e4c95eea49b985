//go:build integration

// Issue 13 parts 4 and 6, telemetry: a real Prometheus (Debian's prometheus
// package) scrapes a GPU node of slurmd-go started with --metrics-addr while a
// GPU batch job runs on it, and every panel query of the shipped Grafana
// dashboard (dashboards/slurmd-go.json) is run through Prometheus's HTTP API and
// must return data.
//
// The node is bin/slurmd-go-nvmlmock (`make nvmlmock`: go-nvml's 8 x H100 mock as
// its NVML, GPU i at 10*i % utilisation) with a static gres.conf of eight GPUs
// whose device files the test creates (minors 0-7, as the mock's). The job asks
// `--gres=gpu:2`; what the metrics say is compared with what slurmctld and the
// mock say: the GPUs labelled with the job's job_id, step and user are the ones
// `scontrol -d show job` lists (IDX), the job holds 2 GPUs of which 1 is idle
// (the mock's GPU 0), the batch launch is counted once, one job runs while it
// runs and none once it is cancelled, and its GPU series lose the job labels.
//
// Only slurmd-go serves metrics (stock slurmd has no such endpoint), so the node
// is slurmd-go whatever TIEE_SLURMD_IMPL says. Prometheus listens on a port of
// 28000-28499 with its storage in the test's temporary directory and scrapes
// every second; every wait is on Prometheus's own state (target up, series
// present), bounded by metricsWaitTimeout.
//
// Wall time: about 60 s (one node, one job, the daemon's 10 s sample interval).
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/dashboards"
	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/integration/spawn"
)

const (
	// metricsWaitTimeout bounds each wait on Prometheus's state on a loaded machine.
	metricsWaitTimeout = 90 * time.Second
	// promStartTimeout bounds Prometheus's start (it replays an empty WAL).
	promStartTimeout = 60 * time.Second
	// promQueryTimeout bounds one HTTP API call.
	promQueryTimeout = 10 * time.Second
	// promPoll is how often Prometheus's state is read while waiting.
	promPoll = 250 * time.Millisecond
	// The ports Prometheus and the node's metrics server are drawn from.
	metricsPortLow, metricsPortHigh = 28000, 28500
	// promRateInterval stands for Grafana's $__rate_interval: with a 1 s scrape
	// interval a minute holds enough samples for every rate().
	promRateInterval = "1m"
	// daemonRow and gpuRow are the dashboard's row titles.
	daemonRow, gpuRow = "slurmd-go daemon", "GPUs by job"
)

func TestMetrics(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not installed (scripts/install-deps.sh installs Debian's package): %v", err)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "slurmd-go-nvmlmock")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `make nvmlmock`)", bin, err)
	}
	t.Setenv(cluster.EnvSlurmdBin, bin)
	ports, err := spawn.FreePorts(2, metricsPortLow, metricsPortHigh)
	if err != nil {
		t.Fatal(err)
	}
	target := "127.0.0.1:" + strconv.Itoa(ports[0])
	dev := gresDevices(t, 8)
	o := batchOptions(cluster.ImplGo)
	o.Nodes = 1
	o.DaemonArgs = []string{"--metrics-addr=" + target}
	o.ExtraConf = append(o.ExtraConf, "GresTypes=gpu")
	o.NodeExtra = "Gres=gpu:" + h100Type + ":8"
	o.GresConf = []string{"AutoDetect=off", "Name=gpu Type=" + h100Type + " File=" + dev + "/nvidia[0-7]"}
	c := cluster.Start(t, o)
	node := c.Nodes[0].Name

	p := startPrometheus(t, promBin, ports[1], target)
	p.waitValue(t, "the node's target up", `up{job="slurmd-go"}`, func(v float64) bool { return v == 1 })

	p.waitValue(t, "the mock's 8 GPUs scraped", `count(DCGM_FI_DEV_GPU_UTIL)`, func(v float64) bool { return v == 8 })

	job := c.Sbatch(t, cluster.TestUser, "#!/bin/sh\nexec sleep 300\n", "-w", node, "-N1", "-t", "5", "--gres=gpu:2")
	c.WaitJob(t, job, metricsWaitTimeout, "RUNNING")
	p.waitValue(t, "one running job scraped", `slurmd_go_jobs_running`, func(v float64) bool { return v == 1 })
	p.waitValue(t, "the batch launch counted", `sum(slurmd_go_rpc_requests_total{msg_type="REQUEST_BATCH_JOB_LAUNCH",result="ok"})`,
		func(v float64) bool { return v == 1 })

	// The GPUs labelled with the job are those slurmctld gave it.
	want := jobGPUDevices(t, c, job)
	held := p.waitResult(t, "the job's GPUs labelled", fmt.Sprintf(`DCGM_FI_DEV_GPU_UTIL{job_id=%q}`, job), func(r []promSample) (bool, string) {
		if len(r) != len(want) {
			return false, fmt.Sprintf("%d series, want %d", len(r), len(want))
		}
		return true, ""
	})
	var got []string
	for _, s := range held {
		got = append(got, s.labels["device"])
		if s.labels["step"] != "batch" || s.labels["user"] != cluster.TestUser || s.labels["modelName"] != "NVIDIA H100 80GB HBM3" {
			t.Errorf("job %s's GPU series labels %v: want step batch, user %s, the mock's model", job, s.labels, cluster.TestUser)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("GPUs labelled with job %s: %v; slurmctld gave it %v", job, got, want)
	}
	jobSel := fmt.Sprintf(`{job_id=%q,user=%q}`, job, cluster.TestUser)
	p.waitValue(t, "the job's 2 GPUs", "slurmd_go_job_gpus_allocated"+jobSel, func(v float64) bool { return v == 2 })
	idle := 0.0
	for _, d := range want {
		if d == "nvidia0" { // the mock's GPU 0 runs at 0 %
			idle++
		}
	}
	p.waitValue(t, "the job's idle GPUs", "slurmd_go_job_gpus_idle"+jobSel, func(v float64) bool { return v == idle })

	qs, err := dashboards.Queries(dashboards.SlurmdGo)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, q := range qs {
		rows[q.Row]++
		expr := dashboards.Expand(q.Expr, promRateInterval)
		t.Run(q.Panel+"/"+q.RefID, func(t *testing.T) {
			switch q.Row {
			case daemonRow:
				// Data from this node, and at least one finite value (a
				// histogram_quantile over no requests is NaN).
				p.waitResult(t, q.Panel, expr, func(r []promSample) (bool, string) {
					for _, s := range r {
						if !math.IsNaN(s.value) && !math.IsInf(s.value, 0) {
							return true, ""
						}
					}
					return false, fmt.Sprintf("%d series, none finite", len(r))
				})
			case gpuRow:
				// Data, from this job's GPUs where the panel is per job.
				p.waitResult(t, q.Panel, expr, func(r []promSample) (bool, string) {
					for _, s := range r {
						if id, ok := s.labels["job_id"]; ok && id != job {
							return false, fmt.Sprintf("a series of job %q", id)
						}
					}
					return true, ""
				})
			default:
				t.Fatalf("panel %q is under row %q, which this test does not know", q.Panel, q.Row)
			}
		})
	}
	if rows[daemonRow] == 0 || rows[gpuRow] == 0 {
		t.Fatalf("dashboard rows %v: want both %q and %q", rows, daemonRow, gpuRow)
	}

	// The job ends: the running-job gauge falls back to 0 and its GPUs lose
	// its labels at the next sample.
	c.MustRun(t, "", "scancel", job)
	c.WaitJob(t, job, metricsWaitTimeout, "CANCELLED", "COMPLETED")
	p.waitValue(t, "no running job scraped", `slurmd_go_jobs_running`, func(v float64) bool { return v == 0 })
	p.waitValue(t, "no GPU labelled with a job", `count(DCGM_FI_DEV_GPU_UTIL{job_id=""})`, func(v float64) bool { return v == 8 })
}

// jobGPUDevices are the device names (nvidia<IDX>) of the GPUs slurmctld gave
// a running job, from `scontrol -d show job` (GRES=gpu:...(IDX:0-1)), sorted.
func jobGPUDevices(t *testing.T, c *cluster.Cluster, job string) []string {
	t.Helper()
	out := c.MustRun(t, "", "scontrol", "-d", "show", "job", job)
	m := regexp.MustCompile(`GRES=gpu[^ ]*\(IDX:([0-9,-]+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("scontrol -d show job %s lists no GPU index:\n%s", job, out)
	}
	var devs []string
	for _, r := range strings.Split(m[1], ",") {
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a {
			t.Fatalf("GPU index %q in %q", r, m[0])
		}
		for i := a; i <= b; i++ {
			devs = append(devs, "nvidia"+strconv.Itoa(i))
		}
	}
	slices.Sort(devs)
	return devs
}

// prom is a running Prometheus.
type prom struct {
	base string // http://127.0.0.1:port
}

type promSample struct {
	labels map[string]string
	value  float64
}

// startPrometheus runs Debian's prometheus with its own config and storage in
// the test's temporary directory, scraping target every second, and waits
// until it is ready. It is killed at cleanup.
func startPrometheus(t *testing.T, bin string, port int, target string) *prom {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: slurmd-go
    static_configs:
      - targets: [%q]
`, target)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(port)
	out, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--storage.tsdb.retention.time=1h", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = out, out
	sp := spawn.New()
	if err := sp.Start(cmd); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		sp.Close()
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	p := &prom{base: "http://" + listen}
	deadline := time.Now().Add(promStartTimeout)
	for {
		select {
		case <-exited:
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("prometheus exited: %v\n%s", waitErr, b)
		default:
		}
		if code, _, err := p.get("/-/ready"); err == nil && code == http.StatusOK {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready on %s after %v", listen, promStartTimeout)
		}
		time.Sleep(promPoll)
	}
}

func (p *prom) get(path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), promQueryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// query runs an instant query; an error is Prometheus's (a bad expression).
func (p *prom) query(expr string) ([]promSample, error) {
	code, b, err := p.get("/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w: %s", code, err, b)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("HTTP %d: %s", code, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %q, want vector", r.Data.ResultType)
	}
	var out []promSample
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("value %v: %w", s.Value[1], err)
		}
		out = append(out, promSample{labels: s.Metric, value: v})
	}
	return out, nil
}

// waitResult polls expr until ok accepts its result; a query error fails at once.
func (p *prom) waitResult(t *testing.T, what, expr string, ok func([]promSample) (bool, string)) []promSample {
	t.Helper()
	deadline := time.Now().Add(metricsWaitTimeout)
	last := "no result yet"
	for {
		r, err := p.query(expr)
		if err != nil {
			t.Fatalf("%s: %s: %v", what, expr, err)
		}
		if len(r) > 0 {
			var good bool
			if good, last = ok(r); good {
				return r
			}
		} else {
			last = "empty result"
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s: %s", metricsWaitTimeout, what, expr, last)
		}
		time.Sleep(promPoll)
	}
}

// waitValue waits until expr has exactly one series whose value ok accepts.
func (p *prom) waitValue(t *testing.T, what, expr string, ok func(float64) bool) {
	t.Helper()
	p.waitResult(t, what, expr, func(r []promSample) (bool, string) {
		if len(r) != 1 {
			return false, fmt.Sprintf("%d series, want 1", len(r))
		}
		if !ok(r[0].value) {
			return false, "value " + strconv.FormatFloat(r[0].value, 'g', -1, 64)
		}
		return true, ""
	})
}
