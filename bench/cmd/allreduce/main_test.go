package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	rank, size, node, err := fromEnv(env(map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURMD_NODENAME": "n4"}))
	if err != nil || rank != 3 || size != 4 || node != "n4" {
		t.Errorf("got %d %d %q %v, want 3 4 n4", rank, size, node, err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SLURM_NTASKS": "4"}, "SLURM_PROCID is not set"},
		{map[string]string{"SLURM_PROCID": "0"}, "SLURM_NTASKS is not set"},
		{map[string]string{"SLURM_PROCID": "x", "SLURM_NTASKS": "4"}, `SLURM_PROCID="x" is not an integer`},
	} {
		if _, _, _, err := fromEnv(env(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %v: error %v, want %q", tc.env, err, tc.want)
		}
	}
}

func TestListenIP(t *testing.T) {
	const addrs = "n1=10.0.0.1, n2=10.0.0.2"
	if ip, err := listenIP(addrs, "n2"); ip != "10.0.0.2" || err != nil {
		t.Errorf("n2: %q %v", ip, err)
	}
	if ip, err := listenIP("", ""); ip != "127.0.0.1" || err != nil {
		t.Errorf("no -node-addrs: %q %v", ip, err)
	}
	for _, tc := range [][2]string{{addrs, "n3"}, {addrs, ""}, {"n1=bogus", "n1"}, {"n1=10.0.0.1,n1=10.0.0.2", "n1"}} {
		if _, err := listenIP(tc[0], tc[1]); err == nil {
			t.Errorf("%q, node %q: no error", tc[0], tc[1])
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	one := map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURMD_NODENAME": "n1"}
	var out, errb bytes.Buffer
	if code := run([]string{"-bytes", "64", "-iters", "2", "-warmup", "1"}, env(one), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var line struct {
		Ranks  int       `json:"ranks"`
		StepsS []float64 `json:"steps_s"`
		Nodes  []string  `json:"nodes"`
		OK     bool      `json:"ok"`
	}
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.Ranks != 1 || len(line.StepsS) != 2 ||
		len(line.Nodes) != 1 || line.Nodes[0] != "n1" || !line.OK || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("stdout %q (%v)", out.String(), err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"SLURM_PROCID": "0"}, "allreduce: SLURM_NTASKS is not set"},
		{[]string{"-bytes", "6"}, one, "multiple of 4*ranks"},
		{[]string{"-node-addrs", "n2=10.0.0.2"}, one, "allreduce: rank 0 (node n1): node n1 (SLURMD_NODENAME) is not in -node-addrs"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(tc.args, env(tc.env), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%v %v: exit %d, stderr %q, stdout %q; want exit 2 and %q", tc.args, tc.env, code, errb.String(), out.String(), tc.want)
		}
	}
}
