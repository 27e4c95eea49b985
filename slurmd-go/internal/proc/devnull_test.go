package proc

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAttachDevNull: the child's stdin is /dev/null opened read-write (its
// fdinfo flags end in 2, O_RDWR), not os/exec's read-only one.
func TestAttachDevNull(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "readlink /proc/self/fd/0; grep ^flags: /proc/self/fdinfo/0")
	defer AttachDevNull(cmd, false)()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 3 || lines[0] != "/dev/null" || !strings.HasSuffix(lines[2], "2") {
		t.Fatalf("child's stdin: %q, want /dev/null with O_RDWR flags", out)
	}
}
