package config

import "testing"

func TestParseFlags(t *testing.T) {
	t.Setenv("SLURM_CONF", "")
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, f Flags)
	}{
		{"stock command line", []string{"-D", "-N", "n1", "-f", "/x/slurm.conf", "-vv", "-L", "/x/n1.log"}, func(t *testing.T, f Flags) {
			if !f.Foreground || f.NodeName != "n1" || f.ConfFile != "/x/slurm.conf" || f.Verbose != 2 || f.LogFile != "/x/n1.log" {
				t.Fatalf("got %+v", f)
			}
		}},
		{"combined short flags", []string{"-Dvvv", "-Nn2"}, func(t *testing.T, f Flags) {
			if !f.Foreground || f.Verbose != 3 || f.NodeName != "n2" {
				t.Fatalf("got %+v", f)
			}
		}},
		{"dynamic node", []string{"-Z", "--conf", "Feature=dyn CPUs=2", "-N", "d1"}, func(t *testing.T, f Flags) {
			if !f.Dynamic || f.DynamicConf != "Feature=dyn CPUs=2" {
				t.Fatalf("got %+v", f)
			}
		}},
		{"default conf file", nil, func(t *testing.T, f Flags) {
			if f.ConfFile != DefaultConfFile || f.ConfFileSet {
				t.Fatalf("got %+v", f)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFlags("slurmd-go", c.args)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, f)
		})
	}
}

func TestParseFlags_SlurmConfEnv(t *testing.T) {
	t.Setenv("SLURM_CONF", "/env/slurm.conf")
	f, err := ParseFlags("slurmd-go", nil)
	if err != nil || f.ConfFile != "/env/slurm.conf" {
		t.Fatalf("got %+v, %v", f, err)
	}
}

func TestParseFlags_Bad(t *testing.T) {
	if _, err := ParseFlags("slurmd-go", []string{"-Q"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
	if _, err := ParseFlags("slurmd-go", []string{"stray"}); err == nil {
		t.Fatal("stray argument accepted")
	}
}

// TestParseFlags_MetricsAddr: off by default; --metrics-addr alone is "on"
// (the documented loopback port); a value or $TIEE_METRICS_ADDR names the
// address, the flag winning over the environment.
func TestParseFlags_MetricsAddr(t *testing.T) {
	for _, c := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"off by default", "", nil, ""},
		{"flag alone", "", []string{"--metrics-addr", "-D"}, "on"},
		{"flag with a value", "", []string{"--metrics-addr=0.0.0.0:9100"}, "0.0.0.0:9100"},
		{"environment", "28123", []string{"-D"}, "28123"},
		{"flag over environment", "28123", []string{"--metrics-addr=9000"}, "9000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(MetricsAddrEnv, c.env)
			f, err := ParseFlags("slurmd-go", c.args)
			if err != nil {
				t.Fatal(err)
			}
			if f.MetricsAddr != c.want {
				t.Fatalf("MetricsAddr %q, want %q", f.MetricsAddr, c.want)
			}
		})
	}
}
