package gpu

import (
	"errors"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestNaming follows gpu_nvml.c's rules (each release's tag) by hand.
func TestNaming(t *testing.T) {
	if got := typeName("NVIDIA H100 80GB HBM3"); got != "nvidia_h100_80gb_hbm3" {
		t.Errorf("typeName = %q", got)
	}
	if got := migBase(typeName("NVIDIA A100-SXM4-40GB")); got != "nvidia_a100" {
		t.Errorf("migBase = %q", got)
	}
	attrs := func(gi, ci uint32, mb uint64) func() (migAttrs, error) {
		return func() (migAttrs, error) { return migAttrs{GISlices: gi, CISlices: ci, MemoryMB: mb}, nil }
	}
	noAttrs := func() (migAttrs, error) { return migAttrs{}, errors.New("no attributes") }
	cases := []struct {
		name    string
		release uint16
		migName string
		attrs   func() (migAttrs, error)
		want    string
	}{
		// 22.05: attributes, memory rounded to nearest GB (roundl).
		{"22.05 7g rounds 39.25 down", slurmproto.Version2205, "NVIDIA A100-SXM4-40GB MIG 7g.40gb", attrs(7, 7, 40192), "_7g.39gb"},
		{"22.05 1g rounds 4.75 up", slurmproto.Version2205, "", attrs(1, 1, 4864), "_1g.5gb"},
		{"22.05 ignores ci slices", slurmproto.Version2205, "", attrs(2, 1, 9856), "_2g.10gb"},
		// 24.11 and 26.05: the MIG device's name after "mig".
		{"24.11 from name", slurmproto.Version2411, "NVIDIA A100-SXM4-40GB MIG 7g.40gb", noAttrs, "_7g.40gb"},
		{"26.05 from name with ci", slurmproto.Version2605, "NVIDIA H100 80GB HBM3 MIG 1c.2g.20gb", noAttrs, "_1c.2g.20gb"},
		// ... or, without "mig_" in it, attributes rounded up, "<ci>c." when they differ.
		{"24.11 fallback ceil", slurmproto.Version2411, "", attrs(7, 7, 40192), "_7g.40gb"},
		{"24.11 fallback ci", slurmproto.Version2411, "weird", attrs(2, 1, 9856), "_1c.2g.10gb"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := migProfile(c.release, c.migName, c.attrs)
			if err != nil || got != c.want {
				t.Fatalf("migProfile = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, err := migProfile(slurmproto.Version2205, "", noAttrs); err == nil {
		t.Error("missing attributes must be an error")
	}
}

func TestMIGUniqueID(t *testing.T) {
	cases := []struct{ driver, want string }{
		{"550.54.15", "MIG-abc"},
		{"470.42.01", "MIG-abc"},
		{"470.42.00", "MIG-GPU-1/3/0"},
		{"460.91.03", "MIG-GPU-1/3/0"},
		{"", "MIG-GPU-1/3/0"},
	}
	for _, c := range cases {
		if got := migUniqueID(c.driver, "MIG-abc", "GPU-1", 3, 0); got != c.want {
			t.Errorf("driver %q: %q, want %q", c.driver, got, c.want)
		}
	}
	if got := emptyLinks(1, 3); got != "0,-1,0" {
		t.Errorf("emptyLinks = %q", got)
	}
}
