package pidfile

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A child process holds the lock, because fcntl locks are per process and a
// second lock from this process would always succeed.
func TestTakeOver_StopsHolder(t *testing.T) {
	if os.Getenv("PIDFILE_HELPER") != "" {
		f, err := Create(os.Getenv("PIDFILE_HELPER"))
		if err != nil {
			os.Exit(3)
		}
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		<-c
		_ = f.Remove()
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "n1.pid")
	cmd := exec.Command(os.Args[0], "-test.run=TestTakeOver_StopsHolder")
	cmd.Env = append(os.Environ(), "PIDFILE_HELPER="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pid, err := Holder(path)
		if err != nil {
			t.Fatal(err)
		}
		if pid == cmd.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper never took the lock (holder %d)", pid)
		}
		time.Sleep(LockPoll)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	old, err := TakeOver(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if old != cmd.Process.Pid {
		t.Fatalf("TakeOver returned %d, want %d", old, cmd.Process.Pid)
	}
	<-done
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Fatalf("pid file holds %q", b)
	}
	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("pid file still there: %v", err)
	}
}

func TestHolder_NoFile(t *testing.T) {
	pid, err := Holder(filepath.Join(t.TempDir(), "none.pid"))
	if err != nil || pid != 0 {
		t.Fatalf("Holder = %d, %v", pid, err)
	}
}
