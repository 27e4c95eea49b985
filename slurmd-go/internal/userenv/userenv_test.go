package userenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func suOutput(body string) []byte {
	return []byte("\n\n\n" + startToken + "\n" + body + stopToken + "\n")
}

func TestParseSu(t *testing.T) {
	cases := []struct {
		name string
		out  []byte
		want []string
		err  error
	}{
		{
			name: "plain",
			out:  suOutput("HOME=/root\nSHELL=/bin/bash\nSHLVL=1\n_=/usr/sbin/slurmstepd\n"),
			want: []string{"HOME=/root", "SHELL=/bin/bash", "SHLVL=1", "_=/usr/sbin/slurmstepd"},
		},
		{
			name: "discarded and malformed",
			out:  suOutput("DISPLAY=:0\nENVIRONMENT=BATCH\nHOSTNAME=n1\nnoequals\nA=1\n"),
			want: []string{"A=1"},
		},
		{
			name: "login noise before the marker, duplicate names overwrite in place",
			out:  append([]byte("motd\nX=ignored\n"), suOutput("A=1\nB=2\nA=3\n")...),
			want: []string{"A=3", "B=2"},
		},
		{
			name: "bash function over lines, empty lines dropped",
			out:  suOutput("BASH_FUNC_f%%=() {  echo hi;\n\n  echo " + stopToken + "\n}\nZ=1\n"),
			want: []string{"BASH_FUNC_f%%=() {  echo hi;\n  echo " + stopToken + "\n}", "Z=1"},
		},
		{name: "nologin shell", out: []byte("This account is currently not available.\n"), err: ErrNoStart},
		{name: "cut short", out: []byte(startToken + "\nA=1\n"), err: ErrNoStop},
		{name: "empty", out: nil, err: ErrNoStart},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSu(tc.out)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseCache(t *testing.T) {
	in := "HOME=/home/u\r\nBASH_FUNC_g%%=() {\n  true\n}\nDISPLAY=:1\n" + strings.Repeat("N", 300) + "=long name\nLAST=x"
	got, err := ParseCache(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"HOME=/home/u", "BASH_FUNC_g%%=() {\n  true\n}", "LAST=x"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRequeueOnFailure(t *testing.T) {
	cases := []struct {
		cache bool
		sp    string
		want  bool
	}{
		{true, "", false},
		{true, "bf_interval=30,No_Env_Cache", true},
		{true, "requeue_setup_env_fail", true},
		{false, "", true}, // 26.05
	}
	for _, tc := range cases {
		if got := RequeueOnFailure(tc.cache, tc.sp); got != tc.want {
			t.Errorf("RequeueOnFailure(%v, %q) = %v, want %v", tc.cache, tc.sp, got, tc.want)
		}
	}
}

// fakeSu writes an executable standing in for su: it gets su's argv.
func fakeSu(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "su")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadSu(t *testing.T) {
	log := hclog.NewNullLogger()
	t.Run("runs the login shell's command", func(t *testing.T) {
		// $4 is the -c command: run it with a known environment.
		su := fakeSu(t, `[ "$1" = "-" ] && [ "$2" = "u1" ] && [ "$3" = "-c" ] || exit 3
[ "$ENVIRONMENT" = "BATCH" ] || exit 4
exec env -i HOME=/home/u1 LOGNAME=u1 /bin/sh -c "$4"
`)
		env, err := loadSu(context.Background(), Options{User: "u1", SuPath: su, Timeout: 30 * time.Second}, log)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range []string{"HOME=/home/u1", "LOGNAME=u1"} {
			if !slices.Contains(env, kv) {
				t.Errorf("%q missing from %q", kv, env)
			}
		}
	})
	t.Run("times out on a background process holding stdout", func(t *testing.T) {
		su := fakeSu(t, "echo "+startToken+"; sleep 30 & exit 0\n")
		start := time.Now()
		_, err := loadSu(context.Background(), Options{User: "u1", SuPath: su, Timeout: 300 * time.Millisecond}, log)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("error %v, want %v", err, ErrTimeout)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v", d)
		}
	})
	t.Run("too much output", func(t *testing.T) {
		su := fakeSu(t, "head -c 300000 /dev/zero\n")
		if _, err := loadSu(context.Background(), Options{User: "u1", SuPath: su, Timeout: 30 * time.Second}, log); !errors.Is(err, ErrOverflow) {
			t.Fatalf("error %v, want %v", err, ErrOverflow)
		}
	})
	t.Run("context deadline is a timeout", func(t *testing.T) {
		su := fakeSu(t, "sleep 30\n")
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := loadSu(ctx, Options{User: "u1", SuPath: su, Timeout: time.Minute}, log); !errors.Is(err, ErrTimeout) {
			t.Fatalf("error %v, want %v", err, ErrTimeout)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		su := fakeSu(t, "sleep 30\n")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err := loadSu(ctx, Options{User: "u1", SuPath: su, Timeout: time.Minute}, log)
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
			t.Fatalf("error %v, want one that wraps %v and not %v", err, context.Canceled, ErrTimeout)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v after the cancel", d)
		}
	})
}

// TestLoad_CancelledSkipsCache: a cancelled load is over; it does not read
// the cache a failed su falls back to.
func TestLoad_CancelledSkipsCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("Load needs root, as slurmd: run as root (make test and CI do)")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "env_cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(CachePath(dir, "u1"), []byte("HOME=/cached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	o := Options{User: "u1", SuPath: fakeSu(t, "sleep 30\n"), Timeout: time.Minute,
		Cache: true, GetEnvTimeout: 2, NoEnvCache: true, StateSaveLocation: dir}
	env, err := Load(ctx, o, hclog.NewNullLogger())
	if !errors.Is(err, context.Canceled) || env != nil {
		t.Fatalf("Load = %q, %v; want no environment and an error wrapping %v", env, err, context.Canceled)
	}
}

func TestLoad_Cache(t *testing.T) {
	if os.Geteuid() != 0 {
		// Load refuses to run for anyone but root, as stock does.
		if _, err := Load(context.Background(), Options{User: "u1"}, hclog.NewNullLogger()); !errors.Is(err, ErrNotRoot) {
			t.Fatalf("error %v, want %v", err, ErrNotRoot)
		}
		return
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "env_cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(CachePath(dir, "u1"), []byte("HOME=/cached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failing := fakeSu(t, "exit 1\n")
	log := hclog.NewNullLogger()
	cases := []struct {
		name string
		o    Options
		want []string
		err  error
	}{
		{"GetEnvTimeout=0 reads the cache", Options{Cache: true, GetEnvTimeout: 0}, []string{"HOME=/cached"}, nil},
		{"failed su with no_env_cache reads the cache", Options{Cache: true, GetEnvTimeout: 2, NoEnvCache: true}, []string{"HOME=/cached"}, nil},
		{"failed su without it fails", Options{Cache: true, GetEnvTimeout: 2}, nil, ErrNoStart},
		{"26.05 has no cache", Options{GetEnvTimeout: 0, NoEnvCache: true}, nil, ErrNoStart},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.User, tc.o.SuPath, tc.o.StateSaveLocation = "u1", failing, dir
			got, err := Load(context.Background(), tc.o, log)
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Errorf("got %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want := "/bin/echo; /bin/echo; /bin/echo; /bin/echo " + startToken + "; " + self + " getenv; /bin/echo " + stopToken
	if got := command(self); got != want {
		t.Errorf("command = %q, want %q", got, want)
	}
	if got := command(filepath.Join(t.TempDir(), "missing")); !strings.Contains(got, "; /bin/env;") && !strings.Contains(got, "; /usr/bin/env;") {
		t.Errorf("without the step manager: %q, want env", got)
	}
}

func TestDump(t *testing.T) {
	var b strings.Builder
	if err := Dump(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "SLURM_RLIMIT_CPU=") {
		t.Errorf("first line %q, want SLURM_RLIMIT_CPU=", lines[0])
	}
	if want := "PATH=" + os.Getenv("PATH"); !slices.Contains(lines, want) {
		t.Errorf("%q missing", want)
	}
}
