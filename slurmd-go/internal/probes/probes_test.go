package probes

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func get(t *testing.T, h http.HandlerFunc) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/", nil))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func TestReadyz_FollowsRegistration(t *testing.T) {
	stepd := filepath.Join(t.TempDir(), "slurmstepd-go")
	if err := os.WriteFile(stepd, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := Handlers{State: &State{}, StepdPath: stepd}
	steps := []struct {
		do   func()
		code int
		body string
	}{
		{func() {}, 503, "not registered with slurmctld yet"},
		{func() { h.State.Failed(errors.New("connection refused")) }, 503, "not registered: connection refused"},
		{func() { h.State.Registered() }, 200, "ok"},
		{func() { h.State.Refused("ESLURM_INVALID_NODE_NAME") }, 503, "registration refused by slurmctld: ESLURM_INVALID_NODE_NAME"},
		{func() { h.State.Registered() }, 200, "ok"},
	}
	for i, s := range steps {
		s.do()
		if code, body := get(t, h.Readyz); code != s.code || body != s.body {
			t.Fatalf("step %d: %d %q, want %d %q", i, code, body, s.code, s.body)
		}
	}
	os.Chmod(stepd, 0o644)
	if code, body := get(t, h.Readyz); code != 503 || !strings.Contains(body, "not executable") {
		t.Fatalf("without an executable step manager: %d %q", code, body)
	}
}

func TestLivez_DialsTheRPCPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	h := Handlers{ListenAddr: "0.0.0.0:" + port}
	if code, body := get(t, h.Livez); code != 200 {
		t.Fatalf("listening: %d %q", code, body)
	}
	ln.Close()
	if code, body := get(t, h.Livez); code != 503 || !strings.Contains(body, "127.0.0.1:"+port) {
		t.Fatalf("closed: %d %q", code, body)
	}
}

func TestLivez_Workers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var workerErr error
	h := Handlers{ListenAddr: ln.Addr().String(), Workers: func(context.Context) error { return workerErr }}
	if code, body := get(t, h.Livez); code != 200 {
		t.Fatalf("workers answer: %d %q", code, body)
	}
	workerErr = errors.New("every worker busy and the queue full")
	if code, body := get(t, h.Livez); code != 503 || !strings.Contains(body, "RPC workers do not answer: every worker busy") {
		t.Fatalf("workers stuck: %d %q", code, body)
	}
}
