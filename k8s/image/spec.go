package image

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Where the image keeps slurmd-go: the daemon runs its step manager from
// beside itself.
const (
	BinDir = "/opt/tiee/bin"
	Slurmd = BinDir + "/slurmd-go"
	Stepd  = BinDir + "/slurmstepd-go"
	// SpankRunner hosts SPANK plugins for the step manager, which runs it from
	// beside itself (stepd.RunnerName); the plugins are the cluster's, mounted.
	SpankRunner = BinDir + "/spank-runner"
	PauseBin    = "/pause"
)

// SlurmdGo is the slurmd-go image: the daemon, its step manager and the
// SPANK host from binDir with the shared libraries they load (so that NVML, which the
// NVIDIA container toolkit mounts into the pod, can be dlopened), busybox
// for /bin/sh and the commands a job script expects, a passwd and group
// the chart replaces with the cluster's, and the directories of
// slurm.conf's defaults.
func SlurmdGo(binDir, busybox string) ([]File, v1.Config, error) {
	files := []File{
		{Path: Slurmd, Src: filepath.Join(binDir, "slurmd-go"), Mode: 0o755},
		{Path: Stepd, Src: filepath.Join(binDir, "slurmstepd-go"), Mode: 0o755},
		{Path: SpankRunner, Src: filepath.Join(binDir, "spank-runner"), Mode: 0o755},
		{Path: "/bin/busybox", Src: busybox, Mode: 0o755},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), Mode: 0o644},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnogroup:x:65534:\n"), Mode: 0o644},
		{Path: "/tmp", Dir: true, Mode: 0o777 | os.ModeSticky},
		{Path: "/root", Dir: true, Mode: 0o700},
	}
	for _, d := range []string{"/etc/slurm", "/var/spool/slurmd", "/var/log/slurm", "/run/slurm", "/run/munge"} {
		files = append(files, File{Path: d, Dir: true, Mode: 0o755})
	}
	for _, b := range []string{files[0].Src, files[1].Src, files[2].Src} {
		libs, err := sharedLibs(b)
		if err != nil {
			return nil, v1.Config{}, err
		}
		for _, l := range libs {
			files = append(files, File{Path: l, Src: l, Mode: 0o755})
		}
	}
	applets, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil, v1.Config{}, fmt.Errorf("image: %s --list-full: %w", busybox, err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if p := "/" + a; p != "/bin/busybox" {
			files = append(files, File{Path: p, Link: "/bin/busybox"})
		}
	}
	cfg := v1.Config{
		Entrypoint: []string{Slurmd},
		Cmd:        []string{"-D"},
		Env:        []string{"PATH=" + BinDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels:     map[string]string{"org.opencontainers.image.title": "slurmd-go"},
	}
	return files, cfg, nil
}

// Pause is the test cluster's sandbox image: one static binary.
func Pause(bin string) ([]File, v1.Config) {
	return []File{{Path: PauseBin, Src: bin, Mode: 0o755}}, v1.Config{Entrypoint: []string{PauseBin}}
}

// sharedLibs lists what ldd says bin loads (none for a static binary).
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			return nil, nil
		}
		if ee, ok := err.(*exec.ExitError); ok && bytes.Contains(ee.Stderr, []byte("not a dynamic executable")) {
			return nil, nil
		}
		return nil, fmt.Errorf("image: ldd %s: %w", bin, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	return libs, sc.Err()
}
