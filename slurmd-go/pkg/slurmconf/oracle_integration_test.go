//go:build integration

package slurmconf

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The real-release oracle: every testdata file goes through each release's
// libslurm (testdata/oracle/oracle.c, compiled against that release) and
// its stock slurmd, and what they say must be the committed golden files
// and what slurmconf says. 22.05 is the host's Slurm; 24.11 and 26.05 run
// in the Debian chroots of scripts/chroots.sh, which must exist (the test
// fails without them). Root is needed for chroot.
//
//	scripts/chroots.sh 24.11 26.05
//	go test -tags integration -count=1 -run TestOracle ./slurmd-go/pkg/slurmconf/
//	    ... -update rewrites the golden files from the releases

var update = flag.Bool("update", false, "rewrite the *.oracle-R and *.stock-R golden files from the real releases")

// Named bounds for the real programs; slurmd -G parses and exits at once,
// but a missing Include makes it retry for 60 s.
const (
	oracleBuildTimeout = 2 * time.Minute
	oracleRunTimeout   = 30 * time.Second
	stockRunTimeout    = 90 * time.Second
)

// chrootDir holds one chroot per release (scripts/chroots.sh).
func chrootDir() string {
	if d := os.Getenv("TIEE_CHROOT_DIR"); d != "" {
		return d
	}
	return "/var/lib/tiee/chroots"
}

// releaseEnv runs a release's programs: on the host for 22.05, in its
// chroot otherwise. Paths under /tmp are the same inside and out.
type releaseEnv struct {
	v    uint16
	root string // "" for the host
	tmp  string // scratch under /tmp: the oracle binary, the testdata copy
}

func newReleaseEnv(t *testing.T, v uint16) *releaseEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the release oracle runs chroot and slurmd: run it as root")
	}
	e := &releaseEnv{v: v}
	if v != V2205 {
		e.root = filepath.Join(chrootDir(), Release(v))
		if _, err := os.Stat(filepath.Join(e.root, ".tiee-ready")); err != nil {
			t.Fatalf("no Slurm %s chroot (%v): run scripts/chroots.sh %s first", Release(v), err, Release(v))
		}
		if _, err := os.Stat(filepath.Join(e.root, "proc/self")); err != nil {
			t.Fatalf("Slurm %s chroot is not mounted (%v): run scripts/chroots.sh %s", Release(v), err, Release(v))
		}
	}
	tmp, err := os.MkdirTemp("/tmp", "slurmconf-oracle-"+Release(v)+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	e.tmp = tmp
	return e
}

func (e *releaseEnv) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if e.root == "" {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "chroot", append([]string{e.root, name}, args...)...)
}

// run returns stdout, stderr and the exit status (an *exec.ExitError) of
// one program; one that cannot run or hangs fails the test.
func (e *releaseEnv) run(t *testing.T, timeout time.Duration, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := e.command(ctx, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: no answer within %v", name, args, timeout)
	}
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out.String(), errOut.String(), err
}

// buildOracle compiles oracle.c against the release's libslurm.
func (e *releaseEnv) buildOracle(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("testdata/oracle/oracle.c")
	if err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(e.tmp, "oracle.c")
	if err := os.WriteFile(c, src, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(e.tmp, "oracle")
	lib := "/usr/lib/x86_64-linux-gnu/slurm-wlm"
	_, stderr, err := e.run(t, oracleBuildTimeout, "cc", "-Wall", "-o", bin, c, "-L"+lib, "-lslurmfull", "-Wl,-rpath,"+lib)
	if err != nil {
		t.Fatalf("building the oracle for Slurm %s: %v\n%s", Release(e.v), err, stderr)
	}
	return bin
}

// copyTestdata copies testdata (Include paths are relative) under e.tmp, so
// the chroot sees it whatever is bind-mounted; it returns the copy's root.
func (e *releaseEnv) copyTestdata(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(e.tmp, "testdata")
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out := filepath.Join(e.tmp, p)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

var (
	stockStamp  = regexp.MustCompile(`^\[[^]]*\] `)
	stockPrefix = regexp.MustCompile(`^slurmd(-[A-Za-z0-9._-]+)?: `)
	// Lines slurmd -G logs about this machine or about the node it was
	// started as, not about the file.
	stockNoise = regexp.MustCompile(`Domain socket directory|cgroup/v1 plugin is deprecated|lookup failure for node|Unable to find node record|differs from hardware|xcpuinfo_hwloc`)
)

// stockLines keeps slurmd's error, fatal and warning lines, without time
// stamps and program names, with replace applied.
func stockLines(out string, replace *strings.Replacer) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		l = stockPrefix.ReplaceAllString(stockStamp.ReplaceAllString(l, ""), "")
		if !strings.HasPrefix(l, "error: ") && !strings.HasPrefix(l, "fatal: ") &&
			!strings.HasPrefix(l, "warning: ") && !strings.Contains(l, "WARNING:") {
			continue
		}
		if stockNoise.MatchString(l) {
			continue
		}
		b.WriteString(replace.Replace(l) + "\n")
	}
	return b.String()
}

// checkGolden compares a live result with its golden file, or writes it.
func checkGolden(t *testing.T, path, live string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(live), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden file (rerun with -update): %v", err)
	}
	if string(want) != live {
		t.Errorf("%s no longer matches the release\n--- live\n%s--- golden\n%s", path, live, want)
	}
}

// oracleOutput is the oracle's stdout, or "error" when the library refused.
func oracleOutput(stdout string, err error) string {
	if err != nil {
		return "error\n"
	}
	return stdout
}

// liveCase is one testdata file as the releases see it.
type liveCase struct {
	golden string            // the testdata file, X.conf: goldens are X.conf.oracle-R, X.conf.stock-R
	oracle []string          // the oracle's arguments
	conf   string            // the slurm.conf slurmd -G reads
	node   string            // the NodeName slurmd -G runs as
	paths  *strings.Replacer // live paths in slurmd's lines to their golden spelling
	read   func() reading    // what slurmconf makes of it
}

// check runs the release's library and stock slurmd on one case and holds
// the goldens and slurmconf against them.
func (e *releaseEnv) check(t *testing.T, oracle string, c liveCase) {
	t.Helper()
	out, _, err := e.run(t, oracleRunTimeout, oracle, c.oracle...)
	lib := oracleOutput(out, err)
	checkGolden(t, c.golden+".oracle-"+Release(e.v), lib)

	// The daemon's view: -G parses everything and exits (non-zero, as the
	// cases name no node it can run as, or are broken).
	_, logs, _ := e.run(t, stockRunTimeout, "/usr/sbin/slurmd", "-G", "-N", c.node, "-f", c.conf)
	stock := stockLines(logs, c.paths)
	checkGolden(t, c.golden+".stock-"+Release(e.v), stock)

	r := c.read()
	compareLibrary(t, c.golden, e.v, r, lib)
	compareStock(t, c.golden, splitLines(stock), r.warnings, r.err)
}

// eachRelease runs body for every release at once, with its environment
// and its oracle built.
func eachRelease(t *testing.T, body func(t *testing.T, e *releaseEnv, oracle string)) {
	for _, v := range Versions {
		t.Run(Release(v), func(t *testing.T) {
			t.Parallel()
			e := newReleaseEnv(t, v)
			body(t, e, e.buildOracle(t))
		})
	}
}

// TestOracle_SlurmConf runs every testdata slurm.conf through each release.
func TestOracle_SlurmConf(t *testing.T) {
	files := confFiles(t)
	eachRelease(t, func(t *testing.T, e *releaseEnv, oracle string) {
		root := filepath.Dir(e.copyTestdata(t))
		for _, f := range files {
			t.Run(f, func(t *testing.T) {
				abs := filepath.Join(root, f)
				e.check(t, oracle, liveCase{
					golden: f, oracle: []string{abs}, conf: abs, node: "tiee-oracle",
					paths: strings.NewReplacer(root+"/", ""),
					read:  func() reading { return readConf(f, e.v) },
				})
			})
		}
	})
}

// TestOracle_CgroupConf runs every testdata cgroup.conf through each
// release, as the cgroup.conf beside a minimal slurm.conf.
func TestOracle_CgroupConf(t *testing.T) {
	const minimal = "ClusterName=cg\nSlurmctldHost=ctl\nProctrackType=proctrack/pgid\nTaskPlugin=task/none\nNodeName=cg1\n"
	files := cgroupFiles(t)
	eachRelease(t, func(t *testing.T, e *releaseEnv, oracle string) {
		for i, f := range files {
			t.Run(f, func(t *testing.T) {
				dir := filepath.Join(e.tmp, fmt.Sprintf("cg%d", i))
				conf, cg := filepath.Join(dir, "slurm.conf"), filepath.Join(dir, "cgroup.conf")
				b, err := os.ReadFile(f)
				if err == nil {
					err = os.MkdirAll(dir, 0o755)
				}
				if err == nil {
					err = os.WriteFile(conf, []byte(minimal), 0o644)
				}
				if err == nil {
					err = os.WriteFile(cg, b, 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
				e.check(t, oracle, liveCase{
					golden: f, oracle: []string{"-c", conf}, conf: conf, node: "cg1",
					paths: strings.NewReplacer(cg, cgroupConfMark),
					read:  func() reading { return readCgroup(cg, e.v) },
				})
			})
		}
	})
}
