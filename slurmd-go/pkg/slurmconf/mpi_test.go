package slurmconf

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestPMIxConfKeys(t *testing.T) {
	text := `# mpi.conf
PMIxCliTmpDirBase=/scratch/pmix
PMIxCollFence=tree
PMIxDebug=2
PMIxDirectConn=no
PMIxDirectConnEarly=yes
PMIxDirectConnUCX=true
PMIxDirectSameArch=1
pmixenv="TIEE_A=1;PMIX_MCA_x=y=z;novalue"
PMIxFenceBarrier=yes
PMIxNetDevicesUCX=mlx5_0:1
PMIxTimeout=42
PMIxTlsUCX=rc,ud
`
	for _, v := range []uint16{V2205, V2411, V2605} {
		c, err := ParsePMIx(strings.NewReader(text), "/etc/slurm/mpi.conf", Options{Version: v})
		if err != nil {
			t.Fatalf("%#x: %v", v, err)
		}
		want := &PMIxConf{
			File: "/etc/slurm/mpi.conf", Exists: true,
			CliTmpDirBase: "/scratch/pmix", CollFence: "tree", Debug: 2,
			DirectConn: false, DirectConnEarly: true, DirectConnUCX: true, DirectSameArch: true,
			Env: "TIEE_A=1;PMIX_MCA_x=y=z;novalue", FenceBarrier: true,
			NetDevicesUCX: "mlx5_0:1", Timeout: 42, TlsUCX: "rc,ud",
			Set: []string{"PMIxCliTmpDirBase", "PMIxCollFence", "PMIxDebug", "PMIxDirectConn", "PMIxDirectConnEarly",
				"PMIxDirectConnUCX", "PMIxDirectSameArch", "PMIxEnv", "PMIxFenceBarrier", "PMIxNetDevicesUCX", "PMIxTimeout", "PMIxTlsUCX"},
		}
		c.Warnings = nil
		if !reflect.DeepEqual(c, want) {
			t.Errorf("%#x:\n got %+v\nwant %+v", v, c, want)
		}
		if got, want := c.EnvPairs(), [][2]string{{"TIEE_A", "1"}, {"PMIX_MCA_x", "y=z"}}; !reflect.DeepEqual(got, want) {
			t.Errorf("EnvPairs %q, want %q", got, want)
		}
	}
}

func TestPMIxConfDefaults(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "mpi.conf")
	c, err := LoadPMIx(missing)
	if err != nil {
		t.Fatal(err)
	}
	if c.Exists || !c.DirectConn || c.Timeout != PMIxDefaultTimeout || c.CliTmpDirBase != "" || c.Env != "" || len(c.Set) != 0 {
		t.Errorf("missing file: %+v", c)
	}
	if err := os.WriteFile(missing, []byte("PMIxEnv=TIEE_PMIX_ENV=set\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = LoadPMIx(missing)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Exists || c.Env != "TIEE_PMIX_ENV=set" || !c.DirectConn || c.Timeout != PMIxDefaultTimeout || !reflect.DeepEqual(c.Set, []string{"PMIxEnv"}) {
		t.Errorf("PMIxEnv only: %+v", c)
	}
	if got := c.EnvPairs(); !reflect.DeepEqual(got, [][2]string{{"TIEE_PMIX_ENV", "set"}}) {
		t.Errorf("EnvPairs %q", got)
	}
	if MPIConfPath("/x/y/slurm.conf") != "/x/y/mpi.conf" {
		t.Errorf("MPIConfPath %q", MPIConfPath("/x/y/slurm.conf"))
	}
}

// Other plugins' keys and stray text are skipped (ignore_new), logged at debug.
func TestPMIxConfIgnoresOthers(t *testing.T) {
	c, err := ParsePMIx(strings.NewReader("PMI2Foo=1\nnot a pair\nPMIxTimeout=7\nPMIxEnv=A=1 trailing\n"), "m.conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 7 || c.Env != "A=1" || len(c.Warnings) != 3 || c.Warnings[0].Line != 1 || c.Warnings[1].Line != 2 || c.Warnings[2].Line != 4 || c.Warnings[0].Level != "debug" {
		t.Errorf("got %+v", c)
	}
}

func TestPMIxConfBadLines(t *testing.T) {
	for _, tc := range []struct {
		text string
		line int
		msg  string
	}{
		{"PMIxTimeout=abc\n", 1, "PMIxTimeout value (abc) is not a valid number"},
		{"# c\nPMIxDebug=-1\n", 2, "PMIxDebug value (-1) is less than zero"},
		{"PMIxTimeout=5\n\nPMIxTimeout=99999999999\n", 3, "is greater than 4294967295"},
		{"PMIxDirectConn=maybe\n", 1, `"maybe" is not a valid option for "PMIxDirectConn"`},
		{"PMIxFenceBarrier=2\n", 1, "PMIxFenceBarrier"},
	} {
		_, err := ParsePMIx(strings.NewReader(tc.text), "/etc/slurm/mpi.conf")
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: error %v, want a ParseError", tc.text, err)
			continue
		}
		if pe.File != "/etc/slurm/mpi.conf" || pe.Line != tc.line || !strings.Contains(pe.Error(), tc.msg) {
			t.Errorf("%q: %q (line %d), want line %d with %q", tc.text, pe.Error(), pe.Line, tc.line, tc.msg)
		}
		if !strings.HasPrefix(pe.Error(), "/etc/slurm/mpi.conf:") || !strings.Contains(pe.Fatal, "mpi.conf file /etc/slurm/mpi.conf") {
			t.Errorf("%q: %q, fatal %q", tc.text, pe.Error(), pe.Fatal)
		}
	}
}
