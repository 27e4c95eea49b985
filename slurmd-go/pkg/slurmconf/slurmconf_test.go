package slurmconf

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

const head = "ClusterName=test\nSlurmctldHost=ctl\n"

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := Parse(strings.NewReader(text), "/etc/slurm/slurm.conf")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestParse_Defaults(t *testing.T) {
	c := mustParse(t, head)
	checks := []struct {
		name      string
		got, want any
	}{
		{"SlurmctldHost", c.SlurmctldHost, []CtldHost{{"ctl", "ctl"}}},
		{"SlurmctldPort", c.SlurmctldPort, uint16(6817)},
		{"SlurmctldPortCount", c.SlurmctldPortCount, uint16(1)},
		{"SlurmdPort", c.SlurmdPort, uint16(6818)},
		{"SlurmUser", c.SlurmUser, "root"},
		{"SlurmdUser", c.SlurmdUser, "root"},
		{"SlurmdSpoolDir", c.SlurmdSpoolDir, "/var/spool/slurmd"},
		{"SlurmdPidFile", c.SlurmdPidFile, "/run/slurmd.pid"},
		{"SlurmdLogFile", c.SlurmdLogFile, ""},
		{"SlurmdDebug", c.SlurmdDebug, LogInfo},
		{"SlurmdTimeout", c.SlurmdTimeout, 300 * time.Second},
		{"MessageTimeout", c.MessageTimeout, 10 * time.Second},
		{"BatchStartTimeout", c.BatchStartTimeout, 10 * time.Second},
		{"KillWait", c.KillWait, 30 * time.Second},
		{"TreeWidth", c.TreeWidth, uint16(50)},
		{"AuthType", c.AuthType, "auth/munge"},
		{"CredType", c.CredType, "cred/munge"},
		{"CredExpire", c.AuthInfo.CredExpire, 120 * time.Second},
		{"TmpFS", c.TmpFS, "/tmp"},
		{"ProctrackType", c.ProctrackType, "proctrack/cgroup"},
		{"TaskPlugin", c.TaskPlugin, "task/none"},
		{"JobAcctGatherType", c.JobAcctGatherType, "jobacct_gather/none"},
		{"SelectType", c.SelectType, "select/linear"},
		{"MpiDefault", c.MpiDefault, "none"},
		{"MaxTasksPerNode", c.MaxTasksPerNode, uint16(512)},
		{"PropagateResourceLimits", c.PropagateResourceLimits, "ALL"},
		{"PlugStackConfig", c.PlugStackConfig, "/etc/slurm/plugstack.conf"},
		{"ReturnToService", c.ReturnToService, uint16(0)},
		{"PrologFlags", c.PrologFlags, PrologFlags(0)},
		{"Raw", c.Raw, map[string]string{"clustername": "test"}},
		{"Nodes", len(c.Nodes()), 0},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestParse_Values(t *testing.T) {
	c := mustParse(t, head+`SlurmctldPort=6817-6818
AuthInfo=socket=/run/munge/alt.socket,ttl=60,cred_expire=300
CommunicationParameters=block_null_hash,NoInAddrAny
PrologFlags=Alloc,NoHold
Prolog=/etc/slurm/prolog.sh
TaskProlog=/etc/slurm/task_prolog.sh
SlurmdParameters=config_overrides
HealthCheckInterval=30
HealthCheckProgram=/usr/sbin/nhc
GresTypes=gpu,mps
JobFileAppend=1
SlurmdDebug=7
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
TopologyParam=NoCtldInAddrAny
`)
	if c.SlurmctldPort != 6817 || c.SlurmctldPortCount != 2 {
		t.Errorf("SlurmctldPort = %d x%d", c.SlurmctldPort, c.SlurmctldPortCount)
	}
	if want := (AuthInfo{Raw: "socket=/run/munge/alt.socket,ttl=60,cred_expire=300", Socket: "/run/munge/alt.socket", TTL: 60, CredExpire: 300 * time.Second}); c.AuthInfo != want {
		t.Errorf("AuthInfo = %+v", c.AuthInfo)
	}
	cp := c.CommunicationParameters
	if !cp.BlockNullHash() || cp.BlockZeroHash() || !cp.NoInAddrAny() || !cp.Has("NoCtldInAddrAny") {
		t.Errorf("CommunicationParameters = %q", cp.Raw)
	}
	if c.PrologFlags != PrologAlloc|PrologNoHold || !c.ConfigOverrides || c.HealthCheckInterval != 30*time.Second ||
		!reflect.DeepEqual(c.GresTypes, []string{"gpu", "mps"}) || !c.JobFileAppend || c.SlurmdDebug != LogDebug3 {
		t.Errorf("config = %+v", c)
	}
	if c.Raw["prolog"] != "/etc/slurm/prolog.sh" {
		t.Errorf("Raw = %v", c.Raw)
	}
}

func TestParse_UnknownDottedKeyRejected(t *testing.T) {
	_, err := Parse(strings.NewReader(head+"Some.Key=1\n"), "x.conf")
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("err = %v, want ErrUnknownKey", err)
	}
}

func TestParse_Errors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		text     string
		wantLine int
		want     error
		wantMsg  string
	}{
		{"two keys on a line", "ClusterName=a SlurmdPort=1\nSlurmctldHost=c\n", 1, ErrSyntax, `Parse error in file t.conf line 1: " SlurmdPort=1"`},
		{"not key=value", head + "\n\nhello world\n", 5, ErrSyntax, "hello world"},
		{"empty value", head + "Epilog=\n", 3, ErrSyntax, "Epilog="},
		{"unknown key", head + "Bogus=1\n", 3, ErrUnknownKey, "Bogus"},
		{"unknown node key", head + "NodeName=n1 Bogus=1\n", 3, ErrUnknownKey, "Bogus"},
		{"bad uint16 names the key", head + "MessageTimeout=ten\n", 3, ErrValue, "MessageTimeout"},
		{"uint16 overflow", head + "TreeWidth=70000\n", 3, ErrValue, "greater than 65535"},
		{"negative", head + "KillWait=-1\n", 3, ErrValue, "less than zero"},
		{"bad bool", head + "UsePAM=maybe\n", 3, ErrValue, "UsePAM"},
		{"bad node number", head + "NodeName=n1 RealMemory=lots\n", 3, ErrValue, "RealMemory"},
		{"error after continuation keeps first line", head + "NodeName=n1 \\\n CPUs=x\n", 3, ErrValue, "CPUs"},
		{"line counts continued lines", head + "NodeName=n1 \\\n CPUs=1\nOops\n", 5, ErrSyntax, "Oops"},
		{"no ClusterName", "SlurmctldHost=c\n", 0, ErrInvalid, "ClusterName"},
		{"no SlurmctldHost", "ClusterName=a\n", 0, ErrInvalid, "SlurmctldHost"},
		{"bad SlurmctldPort", head + "SlurmctldPort=x\n", 3, ErrInvalid, "SlurmctldPort"},
		{"SlurmdPort too big", head + "SlurmdPort=70000\n", 3, ErrInvalid, "SlurmdPort"},
		{"NodeAddr on DEFAULT", head + "NodeName=DEFAULT NodeAddr=1.2.3.4\n", 3, ErrInvalid, "NodeAddr"},
		{"NodeName=ALL", head + "NodeName=ALL\n", 3, ErrInvalid, "reserved"},
		{"port count", head + "NodeName=n[1-3] NodeAddr=h Port=1-2\n", 3, ErrInvalid, "Port count"},
		{"addr count", head + "NodeName=n[1-3] NodeAddr=a,b\n", 3, ErrInvalid, "NodeAddr count"},
		{"bad port", head + "NodeName=n1 Port=http\n", 3, ErrInvalid, "Invalid Port"},
		{"bad state", head + "NodeName=n1 State=HAPPY\n", 3, ErrInvalid, "state"},
		{"bad hostlist", head + "NodeName=n[1-\n", 3, ErrInvalid, "NodeAddr list from n[1-"},
		{"duplicate node", head + "NodeName=n1\nNodeName=n[0-1]\n", 4, ErrInvalid, "Duplicated"},
		{"bad PrologFlags", head + "PrologFlags=Sometimes\n", 3, ErrInvalid, "PrologFlag"},
		{"NoHold with Contain", head + "PrologFlags=NoHold,Contain\n", 3, ErrInvalid, "NoHold"},
		{"tmpfs container needs Contain", head + "JobContainerType=job_container/tmpfs\n", 3, ErrInvalid, "Contain"},
		{"bad SlurmdDebug", head + "SlurmdDebug=loud\n", 3, ErrInvalid, "SlurmdDebug"},
		{"unknown SlurmUser", head + "SlurmUser=tiee-no-such-user\n", 3, ErrInvalid, "SlurmUser"},
		{"bad SlurmctldHost", head + "SlurmctldHost=a)b\n", 3, ErrInvalid, "Bad value"},
		{"text after SlurmctldHost", head + "SlurmctldHost=b Foo=1\n", 3, ErrUnknownKey, "Foo"},
		{"ControlMachine list needs ControlAddr", "ClusterName=a\nControlMachine=a,b\n", 2, ErrInvalid, "ControlAddr"},
		{"BackupAddr alone", "ClusterName=a\nControlMachine=a\nBackupAddr=b\n", 3, ErrInvalid, "BackupAddr"},
		{"IPv4 and IPv6 off", head + "CommunicationParameters=DisableIPv4\n", 3, ErrInvalid, "IPv6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text), "t.conf")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%v is not a *ParseError", err)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.want)
			}
			if pe.File != "t.conf" || pe.Line != tc.wantLine {
				t.Errorf("at %s:%d, want t.conf:%d", pe.File, pe.Line, tc.wantLine)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("message %q lacks %q", err.Error(), tc.wantMsg)
			}
			prefix := "t.conf: "
			if tc.wantLine > 0 {
				prefix = "t.conf:" + strconv.Itoa(tc.wantLine) + ": "
			}
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("message %q does not start with %q", err.Error(), prefix)
			}
		})
	}
}

func TestParse_Lexing(t *testing.T) {
	c := mustParse(t, `# comment
clustername=Lex     # lower-case key, trailing comment
SLURMCTLDHOST=ctl
Epilog=/bin/a\#b
Prolog="/bin/with space"
TaskProlog = /bin/spaced
TaskEpilog=/x\\y
HealthCheckProgram=/a\
/b
RebootProgram="a"b
NodeName=n1 \
   CPUs=2 \    
   RealMemory=5
`)
	for _, tc := range []struct{ got, want string }{
		{c.ClusterName, "lex"},
		{c.Epilog, "/bin/a#b"},
		{c.Prolog, "/bin/with space"},
		{c.TaskProlog, "/bin/spaced"},
		{c.TaskEpilog, `/x\y`},
		{c.HealthCheckProgram, "/a/b"},
		{c.RebootProgram, `"a"b`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if n, ok := c.Node("n1"); !ok || n.CPUs != 2 || n.RealMemory != 5 {
		t.Errorf("n1 = %+v", n)
	}
}

func TestParse_LastValueWins(t *testing.T) {
	c := mustParse(t, head+"KillWait=5\nkillwait=7\n")
	if c.KillWait != 7*time.Second {
		t.Errorf("KillWait = %v", c.KillWait)
	}
}

func TestParse_NodeDefaults(t *testing.T) {
	c := mustParse(t, head+`SlurmdPort=7000
NodeName=DEFAULT CPUs=4 Port=7100 Feature=a
NodeName=n1
NodeName=DEFAULT RealMemory=900
NodeName=n2 Feature=b
NodeName=DEFAULT CPUs=2 Features=c
NodeName=n3 Port=7300
`)
	for _, tc := range []struct {
		name     string
		cpus     uint16
		mem      uint64
		port     uint16
		features []string
	}{
		{"n1", 4, 1, 7100, []string{"a"}},
		{"n2", 4, 900, 7100, []string{"b"}},
		// Feature (old DEFAULT) is looked up before Features (new DEFAULT).
		{"n3", 2, 900, 7300, []string{"a"}},
	} {
		n, ok := c.Node(tc.name)
		if !ok || n.CPUs != tc.cpus || n.RealMemory != tc.mem || n.Port != tc.port || !reflect.DeepEqual(n.Features, tc.features) {
			t.Errorf("%s = %+v, want cpus %d mem %d port %d features %v", tc.name, n, tc.cpus, tc.mem, tc.port, tc.features)
		}
	}
	names := []string{}
	for _, n := range c.Nodes() {
		names = append(names, n.Name)
	}
	if !reflect.DeepEqual(names, []string{"n1", "n2", "n3"}) {
		t.Errorf("Nodes order = %v", names)
	}
}

func TestParse_PartitionDefaults(t *testing.T) {
	c := mustParse(t, head+`PartitionName=DEFAULT MaxTime=10 State=UP
PartitionName=a Nodes=n[1-2] Default=YES
PartitionName=DEFAULT MaxTime=20
PartitionName=b Nodes=ALL State=DOWN
DownNodes=n3 State=DOWN
NodeSet=gpus Feature=gpu
`)
	ps := c.Partitions()
	if len(ps) != 2 || ps[0].Name != "a" || ps[0].MaxTime != "10" || !ps[0].Default || ps[0].State != "UP" ||
		ps[1].MaxTime != "20" || ps[1].State != "DOWN" || ps[1].Default || ps[1].Nodes != "ALL" {
		t.Errorf("partitions = %+v %+v", ps[0], ps[1])
	}
	if d := c.DownNodes(); len(d) != 1 || d[0] != (DownNodes{Nodes: "n3", Reason: "Set in slurm.conf", State: "DOWN"}) {
		t.Errorf("DownNodes = %+v", d)
	}
	if s := c.NodeSets(); len(s) != 1 || s[0] != (NodeSet{Name: "gpus", Feature: "gpu"}) {
		t.Errorf("NodeSets = %+v", s)
	}
}

func TestParse_CtldHosts(t *testing.T) {
	hostnameFunc = func() (string, error) { return "head.example.org", nil }
	defer func() { hostnameFunc = os.Hostname }()
	for _, tc := range []struct {
		name string
		text string
		want []CtldHost
	}{
		{"new style", "ClusterName=a\nSlurmctldHost=h1(10.0.0.1)\nSlurmctldHost=h2\n", []CtldHost{{"h1", "10.0.0.1"}, {"h2", "h2"}}},
		{"localhost becomes short host name", "ClusterName=a\nSlurmctldHost=localhost\n", []CtldHost{{"head", "localhost"}}},
		{"old style", "ClusterName=a\nControlMachine=m\nControlAddr=1.1.1.1\nBackupController=b\nBackupAddr=2.2.2.2\n", []CtldHost{{"m", "1.1.1.1"}, {"b", "2.2.2.2"}}},
		{"new style wins", "ClusterName=a\nControlMachine=m\nSlurmctldHost=s\n", []CtldHost{{"s", "s"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.text)
			if !reflect.DeepEqual(c.SlurmctldHost, tc.want) {
				t.Errorf("SlurmctldHost = %+v, want %+v", c.SlurmctldHost, tc.want)
			}
		})
	}
}

func TestParse_NodeRanges(t *testing.T) {
	c := mustParse(t, head+`NodeName=n[1-4] NodeAddr=127.0.0.1 Port=[7001-7004]
NodeName=g[01-02] NodeHostname=host[1-2] RealMemory=1000
NodeName=h[1-3] NodeHostname=hh NodeAddr=10.0.0.[1-3] BcastAddr=10.1.0.1
`)
	for _, tc := range []struct {
		name, addr, host, bcast string
		port                    uint16
	}{
		{"n1", "127.0.0.1", "n1", "", 7001},
		{"n4", "127.0.0.1", "n4", "", 7004},
		{"g01", "host1", "host1", "", 6818},
		{"g02", "host2", "host2", "", 6818},
		{"h3", "10.0.0.3", "hh", "10.1.0.1", 6818},
	} {
		n, ok := c.Node(tc.name)
		if !ok || n.Addr != tc.addr || n.Hostname != tc.host || n.BcastAddr != tc.bcast || n.Port != tc.port {
			t.Errorf("%s = %+v, want addr %s host %s port %d", tc.name, n, tc.addr, tc.host, tc.port)
		}
	}
	if _, ok := c.Node("n5"); ok {
		t.Error("n5 exists")
	}
	if n, _ := c.NodeByHost("hh"); n == nil || n.Name != "h1" {
		t.Errorf("NodeByHost(hh) = %+v", n)
	}
}

func TestParse_Include(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write("slurm.conf", "ClusterName=Chain\nSlurmctldHost=c\nInclude sub/%c.conf\nKillWait=3\n")
	write("sub/chain.conf", "NodeName=n1\ninclude deeper/nodes.conf\n")
	write("sub/deeper/nodes.conf", "NodeName=n2\nMessageTimeout=4\n")
	c, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes()) != 2 || c.KillWait != 3*time.Second || c.MessageTimeout != 4*time.Second {
		t.Errorf("config = %+v", c)
	}
	wantInc := []string{filepath.Join(dir, "sub/chain.conf"), filepath.Join(dir, "sub/deeper/nodes.conf")}
	if !reflect.DeepEqual(c.Includes, wantInc) {
		t.Errorf("Includes = %v, want %v", c.Includes, wantInc)
	}
	n2, _ := c.Node("n2")
	if n2.File != wantInc[1] || n2.LineNo != 1 {
		t.Errorf("n2 at %s:%d", n2.File, n2.LineNo)
	}

	for _, tc := range []struct {
		name     string
		files    map[string]string
		wantFile string
		wantLine int
		want     error
	}{
		{"missing file", map[string]string{"m.conf": head + "Include nope.conf\n"}, "m.conf", 3, ErrInclude},
		{"error inside include", map[string]string{"m.conf": head + "Include i.conf\n", "i.conf": "\nBad=1\n"}, "i.conf", 2, ErrUnknownKey},
		{"%c before ClusterName", map[string]string{"m.conf": "Include %c.conf\n" + head}, "m.conf", 1, ErrInclude},
		{"cycle", map[string]string{"m.conf": head + "Include m.conf\n"}, "m.conf", 3, ErrInclude},
		{"no glob in 22.05", map[string]string{"m.conf": head + "Include *.inc\n", "a.inc": "KillWait=1\n"}, "m.conf", 3, ErrInclude},
		{"leading blank is not an include", map[string]string{"m.conf": head + " Include a.inc\n", "a.inc": ""}, "m.conf", 3, ErrSyntax},
		{"junk after file", map[string]string{"m.conf": head + "Include a.inc junk\n", "a.inc": ""}, "m.conf", 3, ErrSyntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(filepath.Join(d, "m.conf"))
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want *ParseError wrapping %v", err, tc.want)
			}
			if pe.File != filepath.Join(d, tc.wantFile) || pe.Line != tc.wantLine {
				t.Errorf("at %s:%d, want %s:%d", pe.File, pe.Line, tc.wantFile, tc.wantLine)
			}
		})
	}
}

func TestParse_EmptyAndBlank(t *testing.T) {
	for _, text := range []string{"", "\n\n   \n# only comments\n"} {
		_, err := Parse(strings.NewReader(text), "e.conf")
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: err = %v, want ErrInvalid (no ClusterName)", text, err)
		}
	}
}

func TestParseNodeLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Node
	}{
		{"dynamic -Z conf", "NodeName=dyn1 CPUs=8 Boards=1 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=1000 Gres=gpu:1 Feature=a,b",
			Node{Name: "dyn1", Addr: "dyn1", Hostname: "dyn1", CPUs: 8, Boards: 1, Sockets: 2, SocketsPerBoard: 2, CoresPerSocket: 2, ThreadsPerCore: 2, RealMemory: 1000, Weight: 1, Gres: "gpu:1", Features: []string{"a", "b"}}},
		{"no name", "Gres=gpu:2 Feature=x", Node{CPUs: 1, Boards: 1, Sockets: 1, SocketsPerBoard: 1, CoresPerSocket: 1, ThreadsPerCore: 1, RealMemory: 1, Weight: 1, Gres: "gpu:2", Features: []string{"x"}}},
		{"port and addr", "NodeName=d2 NodeAddr=10.0.0.2 Port=7002 CPUs=2",
			Node{Name: "d2", Addr: "10.0.0.2", Hostname: "d2", Port: 7002, CPUs: 2, Boards: 1, Sockets: 2, SocketsPerBoard: 2, CoresPerSocket: 1, ThreadsPerCore: 1, RealMemory: 1, Weight: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseNodeLine(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			n.Line, n.File, n.LineNo, n.LineKeys = "", "", 0, nil
			if !reflect.DeepEqual(*n, tc.want) {
				t.Errorf("got  %+v\nwant %+v", *n, tc.want)
			}
		})
	}
	for _, bad := range []string{"CPUs=x", "Bogus=1", "NodeName=n1 junk", "NodeName=DEFAULT CPUs=1", "Port=0"} {
		if _, err := ParseNodeLine(bad); err == nil {
			t.Errorf("ParseNodeLine(%q) succeeded", bad)
		}
	}
}

func TestExpandPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/var/spool/slurmd", "/var/spool/slurmd"},
		{"/var/spool/slurmd/%n", "/var/spool/slurmd/n1"},
		{"/var/log/%h/%n.log", "/var/log/host1/n1.log"},
		{"/x/%n/%n", "/x/n1/%n"}, // only the first, as Slurm
		{"/x/%n-%h", "/x/n1-host1"},
	} {
		if got := ExpandPath(tc.in, "n1", "host1"); got != tc.want {
			t.Errorf("ExpandPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseError_Error(t *testing.T) {
	e := &ParseError{File: "a.conf", Line: 7, Msg: "boom", Err: ErrSyntax}
	if e.Error() != "a.conf:7: boom" || !errors.Is(e, ErrSyntax) {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestHashLine_SignExtends(t *testing.T) {
	// A byte >= 0x80 is a negative char in C and sets the high bits.
	if hashLine(0, "\xe9") == hashLine(0, "\x69") {
		t.Error("high byte hashed like its low 7 bits")
	}
}

// fuzzEveryRelease reads any text as every release and leniently: no
// crash, and every error is a *ParseError.
func fuzzEveryRelease(f *testing.F, name string, read func(s, path string, v uint16) error) {
	f.Fuzz(func(t *testing.T, s string) {
		path := filepath.Join(t.TempDir(), name)
		for _, v := range append([]uint16{Lenient}, Versions...) {
			var pe *ParseError
			if err := read(s, path, v); err != nil && !errors.As(err, &pe) {
				t.Fatalf("%s: error %v is not a *ParseError", Release(v), err)
			}
		}
	})
}

func addFiles(f *testing.F, glob string) {
	files, _ := filepath.Glob(glob)
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{head, head + "NodeName=n[1-3] CPUs=2 Port=1-3 NodeAddr=a\n", "Include x\n", "a=\"b c\" d\n", "NodeName=n1 \\\n CPUs=1\n", "#\\\\\n"} {
		f.Add(s)
	}
	addFiles(f, "testdata/*/*.conf")
	fuzzEveryRelease(f, "f.conf", func(s, path string, v uint16) error {
		c, err := Parse(strings.NewReader(s), path, Options{Version: v})
		if err == nil {
			_ = render(c, v)
		}
		return err
	})
}

func FuzzParseCgroup(f *testing.F) {
	addFiles(f, "testdata/cgroup/*/*.conf")
	f.Add("AllowedRAMSpace=0x1p3\nMaxSwapPercent=inf\nMinRAMSpace=1k\n")
	fuzzEveryRelease(f, "cgroup.conf", func(s, path string, v uint16) error {
		c, err := ParseCgroup(strings.NewReader(s), path, Options{Version: v})
		if err == nil {
			_ = renderCgroup(c, v)
		}
		return err
	})
}
