package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// StatusInt is the number in field key ("Tgid", "TracerPid", ...) of
// /proc/<pid>/status.
func StatusInt(pid int, key string) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	prefix := []byte(key + ":")
	for l := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, prefix); ok {
			return strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}
