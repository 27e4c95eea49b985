package gpu

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// DefaultMIGMinorsPath is where the NVIDIA driver lists the minor numbers
// of the MIG capability devices /dev/nvidia-caps/nvidia-cap<minor>.
const DefaultMIGMinorsPath = "/proc/driver/nvidia-caps/mig-minors"

// MIGMinors maps "gpu<minor>/gi<id>/access" and
// "gpu<minor>/gi<id>/ci<id>/access" to their capability minors.
type MIGMinors map[string]uint32

// ReadMIGMinors reads a mig-minors file.
func ReadMIGMinors(path string) (MIGMinors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMIGMinors, err)
	}
	defer f.Close()
	return ParseMIGMinors(f, path)
}

// ParseMIGMinors parses "<name> <minor>" lines; name says where for errors.
func ParseMIGMinors(r io.Reader, name string) (MIGMinors, error) {
	m := MIGMinors{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		if len(fs) != 2 {
			return nil, fmt.Errorf("%w: %s:%d: want \"<path> <minor>\", got %q", ErrMIGMinors, name, line, sc.Text())
		}
		v, err := strconv.ParseUint(fs[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: bad minor %q", ErrMIGMinors, name, line, fs[1])
		}
		m[fs[0]] = uint32(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMIGMinors, name, err)
	}
	return m, nil
}

// Lookup returns the capability minors of GPU instance gi and compute
// instance ci on the GPU with minor gpuMinor. Like stock, a minor of 0 counts
// as missing (the driver's 0 is never a GI/CI capability).
func (m MIGMinors) Lookup(gpuMinor, gi, ci int) (giMinor, ciMinor uint32, err error) {
	giMinor = m[fmt.Sprintf("gpu%d/gi%d/access", gpuMinor, gi)]
	ciMinor = m[fmt.Sprintf("gpu%d/gi%d/ci%d/access", gpuMinor, gi, ci)]
	if giMinor == 0 || ciMinor == 0 {
		return 0, 0, fmt.Errorf("%w: no entry for GPU=%d GI=%d CI=%d", ErrMIGMinors, gpuMinor, gi, ci)
	}
	return giMinor, ciMinor, nil
}
