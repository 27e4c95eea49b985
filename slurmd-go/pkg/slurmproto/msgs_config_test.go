package slurmproto

import (
	"os"
	"strings"
	"testing"
)

// 22.05.8's slurmctld answering REQUEST_CONFIG (testdata/README.md): no
// execute flag; the body re-encodes byte for byte.
func TestConfigGolden2205(t *testing.T) {
	b, err := os.ReadFile("testdata/config_response_v2600.bin")
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMessage(b[4:])
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Version != Version2205 || m.Header.MsgType != ResponseConfig {
		t.Fatalf("header %+v", m.Header)
	}
	body, err := DecodeBody(Version2205, ResponseConfig, m.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := body.(*ConfigResponse)
	names := map[string]bool{}
	for _, f := range r.Files {
		names[f.Name] = f.Exists
	}
	if !names["slurm.conf"] || r.SpoolDir != "/tmp/ti-1919486484/spool/%n" || len(r.Files) < 5 {
		t.Fatalf("files %v spool %q", names, r.SpoolDir)
	}
	again, err := EncodeBody(Version2205, r)
	if err != nil || string(again) != string(m.Body) {
		t.Fatalf("re-encoded body differs (%v)", err)
	}
}

// The configless frames of real 24.11.5 and 26.05.5 controllers and nodes
// (testdata/README.md): what a --conf-server node asks and gets.
func TestConfigGolden(t *testing.T) {
	for _, tc := range []struct{ dir string }{{"r2411/slurm"}, {"r2605/slurm"}} {
		v := map[string]string{"r2411/slurm": "v2a00", "r2605/slurm": "v2d00"}[tc.dir]
		read := func(name string) Body {
			b, err := os.ReadFile("testdata/" + tc.dir + "/" + name + "_" + v + ".bin")
			if err != nil {
				t.Fatal(err)
			}
			m, err := DecodeMessage(b[4:])
			if err != nil {
				t.Fatal(err)
			}
			body, err := DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
			if err != nil {
				t.Fatal(err)
			}
			return body
		}
		req := read("req_config").(*ConfigRequest)
		// (26.05's slurmd sends port 0: the port is sackd's)
		if req.Flags != ConfigRequestSlurmd || req.Port != 0 {
			t.Fatalf("%s: request %+v", tc.dir, req)
		}
		for _, name := range []string{"config_response", "req_reconfigure_with_config"} {
			r := read(name).(*ConfigResponse)
			var conf *ConfigFile
			for i := range r.Files {
				if r.Files[i].Name == "slurm.conf" {
					conf = &r.Files[i]
				}
			}
			// (only the fetch's answer names the spool directory)
			if conf == nil || !conf.Exists || !strings.Contains(conf.Content, "SlurmctldHost") || (r.SpoolDir == "") != (name != "config_response") {
				t.Fatalf("%s %s: files %d, slurm.conf %v, spool %q", tc.dir, name, len(r.Files), conf != nil, r.SpoolDir)
			}
		}
	}
}
