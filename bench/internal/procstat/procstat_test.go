package procstat

import (
	"os"
	"testing"
	"time"
)

func TestRead_Self(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSKB <= 0 || s.Threads <= 0 || s.FDs < 3 {
		t.Fatalf("implausible snapshot of this process: %+v", s)
	}
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s2, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s2.FDs != s.FDs+1 {
		t.Fatalf("fds %d after opening one more, want %d", s2.FDs, s.FDs+1)
	}
}

func TestSampler_Summary(t *testing.T) {
	s := Start(os.Getpid(), 5*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for s.Mark() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	se := s.Stop()
	if se.Samples < 3 || se.RSSPeakKB < se.RSSMedianKB || se.RSSMedianKB <= 0 || se.ThreadsPeak <= 0 || se.FDsPeak <= 0 {
		t.Fatalf("series %+v", se)
	}
	if _, err := Read(1 << 30); err == nil {
		t.Fatal("Read of a pid that cannot exist: want an error")
	}
}

func TestMachineCPU(t *testing.T) {
	m, err := MachineCPU()
	if err != nil || m.Busy <= 0 || m.Total < m.Busy || m.IRQ > m.Busy {
		t.Fatalf("%+v err %v", m, err)
	}
}
