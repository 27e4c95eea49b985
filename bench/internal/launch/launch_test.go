package launch

import (
	"strings"
	"testing"
)

func TestHWAttrs(t *testing.T) {
	out := "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\nUpTime=0-01:00:00\n"
	if got, want := hwAttrs(out), "CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"; got != want {
		t.Fatalf("hwAttrs = %q, want %q", got, want)
	}
}

func TestRenderConf(t *testing.T) {
	c := &Cluster{Dir: "/tmp/x", Name: "tbabc", CtldPort: 28001, MungeSocket: "/tmp/x/munge/munge.socket", HWLine: "CPUs=2",
		opts:  Options{SlurmdDebug: "info"},
		Nodes: []*Node{{NodeSpec: NodeSpec{Name: "bstock", Impl: ImplStock}, Port: 28002}, {NodeSpec: NodeSpec{Name: "bgo", Impl: ImplGo}, Port: 28003}}}
	conf := c.renderConf(28004)
	for _, want := range []string{
		"AuthInfo=socket=/tmp/x/munge/munge.socket", "MessageTimeout=10", "SlurmdDebug=info",
		"NodeName=bstock NodeAddr=127.0.0.1 NodeHostname=localhost Port=28002 CPUs=2 State=UNKNOWN",
		"PartitionName=all Nodes=bstock,bgo Default=YES", "PartitionName=pbgo Nodes=bgo",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	if c.Partition("bgo") != "pbgo" {
		t.Fatal("Partition")
	}
}
