//go:build linux && cgo

package gpu

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBuild_NoBindNow: this test binary is linked as the daemon is (cgo,
// go-nvml's --unresolved-symbols=ignore-in-object-files). With BIND_NOW
// the loader would resolve every NVML symbol at start-up and a GPU-less
// node would die before main; so neither the binary nor the build files
// may ask for -z now.
func TestBuild_NoBindNow(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, err := f.DynValue(elf.DT_FLAGS); err == nil {
		for _, x := range v {
			if elf.DynFlag(x)&elf.DF_BIND_NOW != 0 {
				t.Fatalf("%s has DT_FLAGS BIND_NOW", exe)
			}
		}
	}
	if v, err := f.DynValue(elf.DT_FLAGS_1); err == nil {
		for _, x := range v {
			if elf.DynFlag1(x)&elf.DF_1_NOW != 0 {
				t.Fatalf("%s has DT_FLAGS_1 NOW", exe)
			}
		}
	}
	if v, _ := f.DynValue(elf.DT_BIND_NOW); len(v) > 0 {
		t.Fatalf("%s has DT_BIND_NOW", exe)
	}
	bad := regexp.MustCompile(`-z[ ,]?now|bindnow|BIND_NOW`)
	root := filepath.Join("..", "..", "..")
	for _, name := range []string{"Makefile", "scripts/install-deps.sh", "scripts/integration.sh"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue // not every checkout has every script
		}
		if loc := bad.FindIndex(b); loc != nil {
			t.Fatalf("%s asks for immediate binding: %q", name, b[loc[0]:loc[1]])
		}
	}
	if fl := os.Getenv("CGO_LDFLAGS") + " " + os.Getenv("GOFLAGS"); bad.MatchString(fl) {
		t.Fatalf("environment asks for immediate binding: %q", fl)
	}
}

// TestBuild_MockOnlyInMockBinary: the production daemon does not link the
// mock; the nvmlmock build does.
func TestBuild_MockOnlyInMockBinary(t *testing.T) {
	const mock = "github.com/tiee-hpc/tiee/slurmd-go/internal/gpu/gpumock"
	deps := func(tags ...string) string {
		args := append([]string{"list", "-deps"}, tags...)
		args = append(args, "github.com/tiee-hpc/tiee/slurmd-go/cmd/slurmd", "github.com/tiee-hpc/tiee/slurmd-go/internal/gpu")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return string(out)
	}
	if strings.Contains(deps(), mock+"\n") {
		t.Fatal("the production build links gpumock")
	}
	if !strings.Contains(deps("-tags", "nvmlmock"), mock+"\n") {
		t.Fatal("the nvmlmock build does not link gpumock")
	}
}
