package cluster

import (
	"strings"
	"testing"
)

func TestParseSlurmdC(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    Hardware
		wantErr bool
	}{
		{
			name: "debian 22.05",
			in:   "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\nUpTime=0-00:04:06\n",
			want: Hardware{CPUs: 2, Boards: 1, SocketsPerBoard: 1, CoresPerSocket: 2, ThreadsPerCore: 1, RealMemory: 24105},
		},
		{name: "missing memory", in: "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1", wantErr: true},
		{name: "garbage", in: "NodeName=vm CPUs=x Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSlurmdC(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRenderConf_Overrides(t *testing.T) {
	p := confParams{
		ClusterName: "tiabc", Dir: "/tmp/ti-1", CtldPort: 20001, SlurmdPort: 20002,
		Nodes:         []Node{{"t1", 20003}, {"t2", 20004}},
		HW:            Hardware{CPUs: 2, Boards: 1, SocketsPerBoard: 1, CoresPerSocket: 2, ThreadsPerCore: 1, RealMemory: 1000},
		SlurmdTimeout: 8, MaxNodeCount: 6, NodeExtra: "TmpDisk=64",
		Extra: []string{"slurmddebug=debug3", "NodeName=x1 CPUs=1", "PrologFlags=Contain"},
	}
	conf := renderConf(p)
	for _, want := range []string{
		"ClusterName=tiabc\n",
		"SlurmctldHost=localhost(127.0.0.1)\n",
		"SlurmctldPort=20001\n",
		"SlurmdPort=20002\n",
		"SlurmdTimeout=8\n",
		"TreeWidth=2\n",
		"MaxNodeCount=6\n",
		"SlurmdSpoolDir=/tmp/ti-1/spool/%n\n",
		"NodeName=t1 NodeAddr=127.0.0.1 NodeHostname=localhost Port=20003 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 TmpDisk=64 State=UNKNOWN\n",
		"PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
		"slurmddebug=debug3\n",
		"NodeName=x1 CPUs=1\n",
		"PrologFlags=Contain\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("conf lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "SlurmdDebug=debug2") {
		t.Errorf("override did not replace SlurmdDebug:\n%s", conf)
	}
	if strings.Index(conf, "slurmddebug=debug3") > strings.Index(conf, "NodeName=t1") {
		t.Errorf("override should replace in place, before the node lines:\n%s", conf)
	}
}

func TestParseShowNode(t *testing.T) {
	out := `NodeName=t1 Arch=x86_64 CoresPerSocket=2 
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=1.01
   NodeAddr=127.0.0.1 NodeHostName=localhost Port=22033 Version=22.05.8
   OS=Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0 
   State=DOWN+NOT_RESPONDING ThreadsPerCore=1 TmpDisk=64 Weight=1 Owner=N/A MCS_label=N/A
   CfgTRES=cpu=2,mem=24105M,billing=2
   AllocTRES=
   Reason=Not responding [root@2026-11-29T16:12:29]
`
	f := ParseShowNode(out)
	for k, want := range map[string]string{
		"NodeName": "t1", "CPUTot": "2", "Port": "22033", "Version": "22.05.8",
		"OS":      "Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0",
		"State":   "DOWN+NOT_RESPONDING",
		"CfgTRES": "cpu=2,mem=24105M,billing=2", "AllocTRES": "",
		"Reason": "Not responding [root@2026-11-29T16:12:29]",
	} {
		if got, ok := f[k]; !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, want)
		}
	}
}

func TestParseShowSlurmd(t *testing.T) {
	out := "Active Steps             = NONE\nActual real memory       = 24105 MB\nBoot time                = 2026-11-29T16:12:15\nSlurmd PID               = 14825\n"
	f := ParseShowSlurmd(out)
	for k, want := range map[string]string{
		"Active Steps": "NONE", "Actual real memory": "24105 MB", "Boot time": "2026-11-29T16:12:15", "Slurmd PID": "14825",
	} {
		if f[k] != want {
			t.Errorf("%s = %q, want %q", k, f[k], want)
		}
	}
}

func TestStateMatches(t *testing.T) {
	cases := []struct {
		got, want string
		ok        bool
	}{
		{"idle", "idle", true},
		{"idle*", "idle", false},
		{"down*", "down|down*", true},
		{"DOWN", "down|down*", true},
		{"drained", "down|down*", false},
	}
	for _, tc := range cases {
		if StateMatches(tc.got, tc.want) != tc.ok {
			t.Errorf("StateMatches(%q, %q) = %v", tc.got, tc.want, !tc.ok)
		}
	}
	st := ParseSinfoStates("t1 idle\nt2 down*\n\n")
	if st["t1"] != "idle" || st["t2"] != "down*" || len(st) != 2 {
		t.Errorf("ParseSinfoStates = %v", st)
	}
}
