package stepapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func batchID(job uint32) slurmproto.StepID {
	return slurmproto.StepID{JobID: job, StepID: slurmproto.StepIDBatch, StepHetComp: slurmproto.NoVal}
}

func TestSocketPath(t *testing.T) {
	if got := SocketPath("/var/spool/slurmd", "n2", batchID(5)); got != "/var/spool/slurmd/n2_5.4294967291" {
		t.Errorf("batch: %s", got)
	}
	het := slurmproto.StepID{JobID: 5, StepID: 0, StepHetComp: 1}
	if got := SocketPath("/s", "n2", het); got != "/s/n2_5.0.1" {
		t.Errorf("het: %s", got)
	}
	if got := BatchDir("/s", 42); got != "/s/job00042" {
		t.Errorf("batch dir: %s", got)
	}
	if got := BatchDir("/s", 1234567); got != "/s/job1234567" {
		t.Errorf("batch dir: %s", got)
	}
}

func TestSpec_RoundTripAndValidate(t *testing.T) {
	s := StartSpec{SpecVersion: SpecVersion, Kind: KindBatch, NodeName: "n1", SpoolDir: "/s",
		CtldHosts: []string{"h:6817"}, KillWait: 30 * time.Second, LaunchBody: []byte{1, 2, 0}}
	var b bytes.Buffer
	if err := WriteSpec(&b, &s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSpec(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got.KillWait != s.KillWait || !bytes.Equal(got.LaunchBody, s.LaunchBody) || got.NodeName != "n1" {
		t.Errorf("round trip: %+v", got)
	}
	for name, edit := range map[string]func(*StartSpec){
		"version":  func(s *StartSpec) { s.SpecVersion = 99 },
		"kind":     func(s *StartSpec) { s.Kind = "exec" },
		"node":     func(s *StartSpec) { s.NodeName = "" },
		"relative": func(s *StartSpec) { s.SpoolDir = "spool" },
		"ctld":     func(s *StartSpec) { s.CtldHosts = nil },
		"body":     func(s *StartSpec) { s.LaunchBody = nil },
	} {
		bad := s
		edit(&bad)
		if err := bad.Validate(); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	// Unknown fields are refused (a newer daemon's spec).
	var j bytes.Buffer
	_ = writeFrame(&j, []byte(`{"spec_version":1,"kind":"batch","node_name":"n","spool_dir":"/s","ctld_hosts":["x"],"launch_body":"AQ==","from_the_future":1}`))
	if _, err := ReadSpec(&j); err == nil || !strings.Contains(err.Error(), "from_the_future") {
		t.Errorf("unknown field: %v", err)
	}
}

func TestRC(t *testing.T) {
	if RC(nil) != 0 {
		t.Error("nil")
	}
	if RC(&LaunchError{RC: slurmproto.ESlurmdCreateBatchDirError}) != slurmproto.ESlurmdCreateBatchDirError {
		t.Error("launch error")
	}
	if RC(ErrLaunchTimeout) != slurmproto.ESlurmdExecveFailed {
		t.Error("timeout")
	}
}

func TestLaunch_BinaryMissing(t *testing.T) {
	body, _ := slurmproto.EncodeBody(slurmproto.Version2205, &slurmproto.BatchJobLaunch{JobID: 1, Cred: &slurmproto.Cred{}})
	_, err := Launch(context.Background(), "/nonexistent/slurmstepd-go", StartSpec{Kind: KindBatch, NodeName: "n",
		SpoolDir: "/s", CtldHosts: []string{"x"}, ProtocolVersion: slurmproto.Version2205, LaunchBody: body})
	if err == nil || RC(err) != slurmproto.ESlurmdExecveFailed {
		t.Fatalf("Launch = %v", err)
	}
}

// fakeStepd answers the handshake and REQUEST_STATE with state.
func fakeStepd(t *testing.T, path string, state State) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				w := &Wire{RW: c}
				if _, err := w.ReadInt32(); err != nil {
					return
				}
				var o Out
				o.Int32(ProtocolVersion)
				_ = o.Send(c)
				for {
					req, err := w.ReadInt32()
					if err != nil {
						return
					}
					if Request(req) != RequestState {
						return
					}
					var o Out
					o.Int32(int32(state))
					_ = o.Send(c)
				}
			}()
		}
	}()
}

// deadSocket leaves a socket file nobody listens on (ECONNREFUSED).
func deadSocket(t *testing.T, path string, age time.Duration) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	old := time.Now().Add(-age)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func TestListAndScan(t *testing.T) {
	spool := t.TempDir()
	fakeStepd(t, filepath.Join(spool, "n1_10.4294967291"), StateRunning)
	fakeStepd(t, filepath.Join(spool, "n1_11.0.1"), StateStarting)
	fakeStepd(t, filepath.Join(spool, "n1_12.0"), StateNotRunning)
	deadSocket(t, filepath.Join(spool, "n1_13.4294967291"), 11*time.Minute) // stale: removed
	deadSocket(t, filepath.Join(spool, "n1_14.0"), time.Minute)             // recent: kept
	fakeStepd(t, filepath.Join(spool, "n11_15.0"), StateRunning)            // another node
	for _, f := range []string{"n1_x.0", "cred_state", "n1_16.0.junk"} {
		_ = os.WriteFile(filepath.Join(spool, f), nil, 0o600)
	}
	dir13 := BatchDir(spool, 13)
	_ = os.Mkdir(dir13, 0o750)
	_ = os.WriteFile(filepath.Join(dir13, "slurm_script"), []byte("#!/bin/sh\n"), 0o700)

	refs, err := List(spool, "n1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range refs {
		names = append(names, filepath.Base(r.Path))
	}
	if got := strings.Join(names, " "); got != "n1_10.4294967291 n1_11.0.1 n1_12.0 n1_13.4294967291 n1_14.0" {
		t.Fatalf("List = %s", got)
	}
	if refs[1].StepID != (slurmproto.StepID{JobID: 11, StepID: 0, StepHetComp: 1}) || refs[0].StepID != batchID(10) {
		t.Errorf("ids %+v %+v", refs[0].StepID, refs[1].StepID)
	}

	live, err := Scan(context.Background(), spool, "n1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range live {
		got = append(got, filepath.Base(r.Path)+"="+r.State.String())
	}
	if strings.Join(got, " ") != "n1_10.4294967291=running n1_11.0.1=starting" {
		t.Errorf("Scan = %v", got)
	}
	if _, err := os.Lstat(filepath.Join(spool, "n1_13.4294967291")); !errors.Is(err, os.ErrNotExist) {
		t.Error("stale socket not removed")
	}
	if _, err := os.Lstat(dir13); !errors.Is(err, os.ErrNotExist) {
		t.Error("vestigial batch script not purged")
	}
	if _, err := os.Lstat(filepath.Join(spool, "n1_14.0")); err != nil {
		t.Error("recent dead socket removed")
	}
}

// TestClient_ProtocolErrors: a server refusing the version, and one that
// hangs up, give errors, not hangs.
func TestClient_ProtocolErrors(t *testing.T) {
	spool := t.TempDir()
	path := filepath.Join(spool, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.ReadFull(c, make([]byte, 4))
			var o Out
			o.Int32(-1)
			_ = o.Send(c)
			c.Close()
		}
	}()
	if _, err := Dial(context.Background(), path); !errors.Is(err, ErrProtocol) {
		t.Errorf("refused version: %v", err)
	}
	if _, err := Dial(context.Background(), filepath.Join(spool, "none")); err == nil {
		t.Error("dial of a missing socket succeeded")
	}
}
