package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLookupRelease(t *testing.T) {
	cases := []struct {
		name      string
		want      uint16
		wantMin   uint16
		chroot    bool
		authSlurm bool
		wantErr   bool
	}{
		{name: "", want: 0x2600, wantMin: 0x2400},
		{name: "22.05", want: 0x2600, wantMin: 0x2400},
		{name: "24.11", want: 0x2A00, wantMin: 0x2700, chroot: true, authSlurm: true},
		{name: "26.05", want: 0x2D00, wantMin: 0x2A00, chroot: true, authSlurm: true},
		{name: "23.02", wantErr: true},
		{name: "24.11.5", wantErr: true},
	}
	for _, tc := range cases {
		t.Run("release "+tc.name, func(t *testing.T) {
			t.Setenv(EnvChrootDir, "/srv/roots")
			r, err := LookupRelease(tc.name)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !strings.Contains(err.Error(), EnvRelease) {
					t.Errorf("error %q does not name %s", err, EnvRelease)
				}
				return
			}
			if r.ProtocolVersion != tc.want || r.MinProtocolVersion != tc.wantMin || r.AuthSlurm != tc.authSlurm {
				t.Errorf("got %+v, want protocol 0x%04x min 0x%04x auth/slurm %v", r, tc.want, tc.wantMin, tc.authSlurm)
			}
			wantRoot := ""
			if tc.chroot {
				wantRoot = "/srv/roots/" + r.Name
			}
			if r.Root() != wantRoot {
				t.Errorf("Root() = %q, want %q", r.Root(), wantRoot)
			}
		})
	}
}

func TestCheckAuth(t *testing.T) {
	r2205, _ := LookupRelease("22.05")
	r2411, _ := LookupRelease("24.11")
	cases := []struct {
		name    string
		r       Release
		auth    string
		want    string
		wantErr bool
	}{
		{"default is munge", r2205, "", AuthMunge, false},
		{"munge on 24.11", r2411, "munge", AuthMunge, false},
		{"slurm on 24.11", r2411, "slurm", AuthSlurm, false},
		{"no auth/slurm in 22.05", r2205, "slurm", "", true},
		{"unknown", r2411, "jwt", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkAuth(tc.r, tc.auth)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("checkAuth(%s, %q) = %q, %v; want %q (error %v)", tc.r.Name, tc.auth, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// fakeRoot makes a directory tree with executables at the given paths.
func fakeRoot(t *testing.T, paths ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLookPathIn(t *testing.T) {
	root := fakeRoot(t, "/usr/bin/sinfo", "/usr/sbin/slurmd")
	if err := os.WriteFile(filepath.Join(root, "usr/bin/notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"sinfo": "/usr/bin/sinfo", "slurmd": "/usr/sbin/slurmd", "/usr/sbin/slurmd": "/usr/sbin/slurmd"} {
		if got, err := lookPathIn(root, name); err != nil || got != want {
			t.Errorf("lookPathIn(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"srun", "notexec", "/usr/bin/notexec", "/usr/bin"} {
		if got, err := lookPathIn(root, name); err == nil {
			t.Errorf("lookPathIn(%s) = %q, want an error", name, got)
		}
	}
}

func TestWrapCommand(t *testing.T) {
	root := fakeRoot(t, "/usr/bin/sbatch", "/usr/bin/env", "/usr/bin/setpriv")
	chroot := mustLookPath(t, "chroot")
	nsenter := mustLookPath(t, "nsenter")
	cases := []struct {
		name    string
		s       execSpec
		want    []string
		wantDir string
	}{
		{
			name: "chroot as root",
			s:    execSpec{root: root, dir: "/tmp/ti-1/work", argv: []string{"sbatch", "--parsable"}},
			want: []string{chroot, root, "/usr/bin/env", "--chdir=/tmp/ti-1/work", "--", "/usr/bin/sbatch", "--parsable"}, wantDir: "/",
		},
		{
			name: "chroot, namespace, ordinary user, default dir",
			s:    execSpec{root: root, nsPid: 4242, uid: "1001", gid: "1002", argv: []string{"/usr/bin/sbatch"}},
			want: []string{nsenter, "--mount=/proc/4242/ns/mnt", "--", chroot, root, "/usr/bin/env", "--chdir=/", "--",
				"/usr/bin/setpriv", "--reuid=1001", "--regid=1002", "--init-groups", "--", "/usr/bin/sbatch"},
			wantDir: "/",
		},
		{
			name: "host",
			s:    execSpec{dir: "/tmp", uid: "1001", gid: "1002", argv: []string{"true"}},
			want: []string{mustLookPath(t, "setpriv"), "--reuid=1001", "--regid=1002", "--init-groups", "--", mustLookPath(t, "true")}, wantDir: "/tmp",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := wrapCommand(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cmd.Args, tc.want) || cmd.Path != tc.want[0] || cmd.Dir != tc.wantDir {
				t.Errorf("got %q (path %s) in %q\nwant %q in %q", cmd.Args, cmd.Path, cmd.Dir, tc.want, tc.wantDir)
			}
		})
	}
	if _, err := wrapCommand(execSpec{root: root, argv: []string{"srun"}}); err == nil || !strings.Contains(err.Error(), "srun") {
		t.Errorf("a command missing from the root: err %v, want one naming srun", err)
	}
	if _, err := wrapCommand(execSpec{root: root}); err == nil {
		t.Error("no argv: want an error")
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := lookPathIn("", name)
	if err != nil {
		t.Fatalf("%s not on this machine: %v", name, err)
	}
	return p
}

func TestReadPasswd(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	group := filepath.Join(dir, "group")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\ntieeuser:x:1001:1002::/home/tieeuser:/usr/sbin/nologin\nbroken:x:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(group, []byte("root:x:0:\ntieeuser:x:1002:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, ok, err := readPasswd(passwd, "tieeuser")
	want := passwdEntry{name: "tieeuser", uid: "1001", gid: "1002", home: "/home/tieeuser", shell: "/usr/sbin/nologin"}
	if err != nil || !ok || e != want {
		t.Errorf("readPasswd(tieeuser) = %+v, %v, %v; want %+v", e, ok, err, want)
	}
	for _, name := range []string{"broken", "nobody"} {
		if _, ok, err := readPasswd(passwd, name); ok || err != nil {
			t.Errorf("readPasswd(%s) = %v, %v; want absent", name, ok, err)
		}
	}
	if _, _, err := readPasswd(filepath.Join(dir, "none"), "root"); err == nil {
		t.Error("missing passwd file: want an error")
	}
	for gid, want := range map[string]bool{"1002": true, "0": true, "1001": false} {
		if got, err := hasGroupID(group, gid); err != nil || got != want {
			t.Errorf("hasGroupID(%s) = %v, %v; want %v", gid, got, err, want)
		}
	}
}

func TestRenderConf_Auth(t *testing.T) {
	for auth, want := range map[string]string{"": "munge", AuthMunge: "munge", AuthSlurm: "slurm"} {
		conf := renderConf(confParams{Auth: auth, ClusterName: "tiabc", Dir: "/tmp/ti-1"})
		for _, line := range []string{"AuthType=auth/" + want + "\n", "CredType=cred/" + want + "\n"} {
			if !strings.Contains(conf, line) {
				t.Errorf("Auth %q: conf lacks %q", auth, line)
			}
		}
	}
}
