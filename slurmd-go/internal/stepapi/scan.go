package stepapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named limits of Scan.
const (
	// StaleSocketAge is how old a socket refusing connections must be
	// before it is removed (stepd_api.c _handle_stray_socket: 600 s).
	StaleSocketAge = 10 * time.Minute
	// ScanProbeTimeout bounds the probe (connect, handshake, state) of one
	// step socket.
	ScanProbeTimeout = 2 * time.Second
	// ScanParallel is how many sockets Scan probes at once.
	ScanParallel = 16
)

// StepRef is one step socket found in the spool directory.
type StepRef struct {
	StepID slurmproto.StepID
	Path   string
	// State is the step's answer to REQUEST_STATE (Scan only).
	State State
}

// sockRegexp is stepd_available's pattern for nodeName (the node name is
// quoted here; stock puts it in the regex unescaped).
func sockRegexp(nodeName string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(nodeName) + `_([0-9]*)\.([0-9]*)\.?([0-9]*)$`)
}

// List returns the step sockets of nodeName in spoolDir by name, without
// contacting them (stepd_available).
func List(spoolDir, nodeName string) ([]StepRef, error) {
	ents, err := os.ReadDir(spoolDir)
	if err != nil {
		return nil, fmt.Errorf("stepapi: socket directory: %w", err)
	}
	re := sockRegexp(nodeName)
	var refs []StepRef
	for _, e := range ents {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		id := slurmproto.StepID{JobID: atoul(m[1]), StepID: atoul(m[2]), StepHetComp: slurmproto.NoVal}
		if m[3] != "" {
			id.StepHetComp = atoul(m[3])
		}
		refs = append(refs, StepRef{StepID: id, Path: filepath.Join(spoolDir, e.Name())})
	}
	return refs, nil
}

// atoul is slurm_atoul: digits to uint32, 0 on failure.
func atoul(s string) uint32 {
	v, _ := strconv.ParseUint(s, 10, 32)
	return uint32(v)
}

// Scan lists the step sockets of nodeName and probes each (at most
// ScanParallel at once, each bounded by ScanProbeTimeout): it returns the
// steps that answered REQUEST_STATE with a state other than NotRunning,
// which is what slurmd reports at registration. A socket that refuses
// connections and is older than StaleSocketAge is removed, with the
// script directory of a batch step (stepd_api.c _step_connect). Safe for
// concurrent use.
func Scan(ctx context.Context, spoolDir, nodeName string) ([]StepRef, error) {
	refs, err := List(spoolDir, nodeName)
	if err != nil {
		return nil, err
	}
	alive := make([]bool, len(refs))
	sem := make(chan struct{}, ScanParallel)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			pctx, cancel := context.WithTimeout(ctx, ScanProbeTimeout)
			defer cancel()
			st, err := probe(pctx, &refs[i])
			if err != nil {
				if errors.Is(err, syscall.ECONNREFUSED) {
					RemoveStale(spoolDir, refs[i], time.Now())
				}
				return
			}
			refs[i].State = st
			alive[i] = st != StateNotRunning
		}(i)
	}
	wg.Wait()
	out := refs[:0]
	for i, r := range refs {
		if alive[i] {
			out = append(out, r)
		}
	}
	return out, nil
}

func probe(ctx context.Context, r *StepRef) (State, error) {
	c, err := Dial(ctx, r.Path)
	if err != nil {
		return StateNotRunning, err
	}
	defer c.Close()
	return c.State(ctx)
}

// RemoveStale applies stock's stray-socket rule to a socket that refused a
// connection: if it is owned by our uid and older than StaleSocketAge, it
// is unlinked, and for a batch step the vestigial script
// (<spoolDir>/job%05u/slurm_script and its directory) is purged. It
// reports whether the socket was removed.
func RemoveStale(spoolDir string, r StepRef, now time.Time) bool {
	fi, err := os.Lstat(r.Path)
	if err != nil {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uint32(os.Getuid()) {
		return false
	}
	mtime := fi.ModTime()
	removed := false
	if now.Sub(mtime) > StaleSocketAge {
		removed = os.Remove(r.Path) == nil
	}
	if r.StepID.StepID == slurmproto.StepIDBatch {
		// Stock purges the script on every refused connection, old or not.
		dir := BatchDir(spoolDir, r.StepID.JobID)
		_ = os.Remove(filepath.Join(dir, "slurm_script"))
		_ = os.Remove(dir)
	}
	return removed
}

// BatchDir is the directory of a batch job's script (job%05u).
func BatchDir(spoolDir string, jobID uint32) string {
	return filepath.Join(spoolDir, fmt.Sprintf("job%05d", jobID))
}
