package proc

import (
	"os"
	"os/exec"
)

// AttachDevNull gives cmd /dev/null opened read-write as its stdin, and as
// its stdout too when stdout is set: run_command's child gets that stdin,
// and slurmstepd's own stdin and stdout (which the scripts it runs inherit)
// are one such descriptor. Call the returned func once cmd has started, to
// close this process's copy. Where /dev/null cannot be opened cmd keeps
// os/exec's defaults (/dev/null, read-only for stdin).
func AttachDevNull(cmd *exec.Cmd, stdout bool) (release func()) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return func() {}
	}
	cmd.Stdin = null
	if stdout {
		cmd.Stdout = null
	}
	return func() { null.Close() }
}
