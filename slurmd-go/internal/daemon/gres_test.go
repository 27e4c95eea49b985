package daemon

import (
	"bytes"
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// stockCases are pkg/gres's cases with what stock slurmd -G printed.
const stockCases = "../../pkg/gres/testdata"

// gresCase lays a case out as capture.sh did, its device files as real
// character devices when the test runs as root (mknod), else skipped by
// the caller.
func gresCase(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	confs, _ := filepath.Glob(filepath.Join(stockCases, "stock", name, "*.conf"))
	for _, f := range confs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("bash", filepath.Join(stockCases, "slurm.conf.sh"), dir).Output()
	if err != nil {
		t.Fatalf("slurm.conf.sh: %v", err)
	}
	// The daemon runs as whoever runs the test: SlurmdUser follows.
	out = append(out, []byte("SlurmdUser="+currentUser(t)+"\n")...)
	if err := os.WriteFile(filepath.Join(dir, "slurm.conf"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func currentUser(t *testing.T) string {
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// ensureStockDevs makes the cases' File= entries /tmp/tiee-gres-dev/nv0..9
// if missing: character devices 195:N as root (as capture.sh does), plain
// files otherwise (gres.conf parsing only stats them).
func ensureStockDevs(t *testing.T) {
	t.Helper()
	const dir = "/tmp/tiee-gres-dev"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		p := filepath.Join(dir, "nv"+strconv.Itoa(i))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(195, uint32(i)))); err == nil || errors.Is(err, os.ErrExist) {
			continue
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
	}
}

var logPrefix = regexp.MustCompile(`^(slurmd-t1: |\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] )`)

// TestPrintGres_MatchesStock: `slurmd-go -G` prints what stock slurmd -G of
// the pinned release printed for the same files, line for line, with that
// release's log prefix. The cases' File= entries are under
// /tmp/tiee-gres-dev, which pkg/gres/testdata/stock/capture.sh makes.
func TestPrintGres_MatchesStock(t *testing.T) {
	ensureStockDevs(t)
	for _, c := range []string{"typed_shard_t1", "links_cores", "flags_inherit", "err_bad_count", "no_node_gres"} {
		for _, rel := range []string{"22.05", "24.11", "26.05"} {
			t.Run(c+"/"+rel, func(t *testing.T) {
				t.Setenv(ProtocolEnv, rel)
				dir := gresCase(t, c)
				cfg, err := config.LoadAs(config.Flags{ConfFile: filepath.Join(dir, "slurm.conf"), NodeName: "t1"}, startRelease())
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				rc := printGres(&buf, cfg, gres.NullDetector{})
				want, err := os.ReadFile(filepath.Join(stockCases, "stock", c, "stock-"+rel+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
					if !logPrefix.MatchString(l) {
						t.Errorf("line without the %s log prefix: %q", rel, l)
					}
					got = append(got, strings.ReplaceAll(logPrefix.ReplaceAllString(l, ""), dir, "<dir>"))
				}
				if g, w := strings.Join(got, "\n"), strings.TrimRight(string(want), "\n"); g != w {
					t.Errorf("slurmd-go -G:\n%s\nstock:\n%s", g, w)
				}
				if wantRC := map[bool]int{true: 1, false: 0}[strings.HasPrefix(c, "err_")]; rc != wantRC {
					t.Errorf("rc %d, want %d", rc, wantRC)
				}
			})
		}
	}
}

// TestGresInfo_Layout: the registration's gres_info is the packed records
// of the node at the release asked for, flags in that release's bits.
func TestGresWire_Flags(t *testing.T) {
	rec := gres.Record{Name: "gpu", Type: "a100", Count: 1, CPUCnt: 8, Cores: "0-3",
		Flags: gres.Flags{HasFile: true, HasType: true, EnvNVML: true, UUID: true, Explicit: true}}
	for _, tc := range []struct {
		v     uint16
		flags uint32
	}{
		{slurmproto.Version2205, 1<<1 | 1<<2 | 1<<5},
		{slurmproto.Version2411, 1<<1 | 1<<2 | 1<<5 | 1<<12},
		{slurmproto.Version2605, 1<<1 | 1<<2 | 1<<5 | 1<<12 | 1<<14},
	} {
		b := slurmproto.PackGresNodeConfig(tc.v, gresWire([]gres.Record{rec}, tc.v))
		v, recs, err := slurmproto.UnpackGresNodeConfig(b)
		if err != nil || v != tc.v || len(recs) != 1 {
			t.Fatalf("%#x: %v %#x %d", tc.v, err, v, len(recs))
		}
		r := recs[0]
		if r.ConfigFlags != tc.flags || r.PluginID != 7696487 || r.Name != "gpu" || r.Type != "a100" || r.CPUs != "0-3" || r.CPUCnt != 8 {
			t.Errorf("%#x: %+v (flags want %#x)", tc.v, r, tc.flags)
		}
	}
}
