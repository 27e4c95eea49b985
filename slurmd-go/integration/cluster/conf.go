package cluster

import (
	"fmt"
	"github.com/tiee-hpc/tiee/slurmd-go/integration/spawn"
	"strconv"
	"strings"
	"time"
)

// Hardware is what `slurmd -C` reports for this machine. The node lines use exactly
// these values so that slurmctld's validate_node_specs accepts every node.
type Hardware struct {
	CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore int
	RealMemory                                                    uint64 // MiB
}

// NodeLineAttrs renders the hardware as NodeName attributes.
func (h Hardware) NodeLineAttrs() string {
	return fmt.Sprintf("CPUs=%d Boards=%d SocketsPerBoard=%d CoresPerSocket=%d ThreadsPerCore=%d RealMemory=%d",
		h.CPUs, h.Boards, h.SocketsPerBoard, h.CoresPerSocket, h.ThreadsPerCore, h.RealMemory)
}

// parseSlurmdC parses the first line of `slurmd -C`:
// "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105".
func parseSlurmdC(out string) (Hardware, error) {
	var h Hardware
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	seen := map[string]bool{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		var dst *int
		switch k {
		case "CPUs":
			dst = &h.CPUs
		case "Boards":
			dst = &h.Boards
		case "SocketsPerBoard":
			dst = &h.SocketsPerBoard
		case "CoresPerSocket":
			dst = &h.CoresPerSocket
		case "ThreadsPerCore":
			dst = &h.ThreadsPerCore
		case "RealMemory":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return h, fmt.Errorf("cluster: slurmd -C RealMemory %q: %w", v, err)
			}
			h.RealMemory = n
			seen[k] = true
			continue
		default:
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return h, fmt.Errorf("cluster: slurmd -C %s %q: %w", k, v, err)
		}
		*dst = n
		seen[k] = true
	}
	for _, k := range []string{"CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory"} {
		if !seen[k] {
			return h, fmt.Errorf("cluster: slurmd -C output lacks %s: %q", k, line)
		}
	}
	return h, nil
}

// messageTimeout is slurm.conf's MessageTimeout.
const messageTimeout = 5 * time.Second

// Ports are drawn from [portLow, portHigh): below the kernel's ephemeral range
// (32768-60999, so outgoing RPC connections never hold them) and clear of the ranges
// other engineers' private clusters use (17817-17900, 27817-27900).
const (
	portLow  = 20000
	portHigh = 27800
)

// pickPorts returns n distinct TCP ports that were bindable on 0.0.0.0 (the daemons
// listen on the wildcard address). All listeners are held until every port is chosen.
func pickPorts(n int) ([]int, error) { return spawn.FreePorts(n, portLow, portHigh) }

// confParams is everything renderConf needs; it is a pure function of these.
type confParams struct {
	Auth          string // AuthMunge or AuthSlurm
	ClusterName   string
	Dir           string
	CtldPort      int
	SlurmdPort    int // global SlurmdPort: only dynamic (-Z) nodes listen on it
	Nodes         []Node
	NodeAddrs     map[string]string // node -> NodeAddr (Options.Zones); 127.0.0.1 if absent
	CtldAddr      string            // SlurmctldHost's address; "" is 127.0.0.1
	HW            Hardware
	SlurmdTimeout int // seconds
	MaxNodeCount  int
	NodeExtra     string
	Extra         []string
}

// authPlugin is the plugin name of an Auth value (munge when unset).
func authPlugin(auth string) string {
	if auth == AuthSlurm {
		return "slurm"
	}
	return "munge"
}

// alwaysAppended are line keys that never replace a generated line.
var alwaysAppended = map[string]bool{
	"nodename": true, "partitionname": true, "nodeset": true, "downnodes": true, "frontendname": true, "include": true,
}

func lineKey(line string) string {
	k, _, _ := strings.Cut(strings.TrimSpace(line), "=")
	return strings.ToLower(strings.TrimSpace(k))
}

// orLoopback is addr, or 127.0.0.1 if empty.
func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1"
	}
	return addr
}

// renderConf generates slurm.conf. Extra lines whose key matches a generated global
// line replace it in place; all other extra lines are appended in order.
func renderConf(p confParams) string {
	global := []string{
		"ClusterName=" + p.ClusterName,
		"SlurmctldHost=localhost(" + orLoopback(p.CtldAddr) + ")",
		fmt.Sprintf("SlurmctldPort=%d", p.CtldPort),
		fmt.Sprintf("SlurmdPort=%d", p.SlurmdPort),
		"AuthType=auth/" + authPlugin(p.Auth),
		// cred/slurm is served by the auth/slurm plugin (there is no cred_slurm.so).
		"CredType=cred/" + authPlugin(p.Auth),
		"SlurmUser=root",
		"SlurmdUser=root",
		"SelectType=select/cons_tres", // dynamic (-Z) nodes require it
		"SelectTypeParameters=CR_Core_Memory",
		"ProctrackType=proctrack/pgid",
		"TaskPlugin=task/none",
		"JobAcctGatherType=jobacct_gather/none",
		"AccountingStorageType=accounting_storage/none",
		"JobCompType=jobcomp/none",
		"SwitchType=switch/none",
		"MpiDefault=none",
		// slurmctld runs a ping round every SlurmdTimeout/3 seconds (integer division,
		// ping_interval in controller.c) once the previous round is done, and pings only
		// nodes whose last response is older than that: with 8 s a round every 2 s and a
		// healthy node pinged about every 4 s. A failed ping shows the node as "idle*"
		// at once; it is set DOWN "Not responding" in the first round after one that
		// started SlurmdTimeout after its last response. A round that includes a dead
		// node lasts ~MessageTimeout+1 s (connect retried once a second).
		fmt.Sprintf("SlurmdTimeout=%d", p.SlurmdTimeout),
		"SlurmctldTimeout=30",
		fmt.Sprintf("MessageTimeout=%d", int(messageTimeout/time.Second)),
		"ReturnToService=2",
		// TreeWidth=2: an RPC to all of t[1-4] goes slurmctld -> t1 (forward list
		// t[2-3]) and slurmctld -> t4; t1 forwards to t2 and t3 (set_span(4,2)=[2,0]).
		// Agents for <= 2 nodes are sent directly, without forwarding.
		"TreeWidth=2",
		fmt.Sprintf("MaxNodeCount=%d", p.MaxNodeCount),
		"KillWait=5",
		"InactiveLimit=0",
		"MinJobAge=30",
		"StateSaveLocation=" + p.Dir + "/state",
		"SlurmdSpoolDir=" + p.Dir + "/spool/%n",
		"SlurmdPidFile=" + p.Dir + "/%n.pid",
		"SlurmdLogFile=" + p.Dir + "/%n.log",
		"SlurmctldPidFile=" + p.Dir + "/slurmctld.pid",
		"SlurmctldLogFile=" + p.Dir + "/slurmctld.log",
		"SlurmctldDebug=debug",
		"SlurmdDebug=debug2", // logs every RPC ("Processing RPC: REQUEST_PING")
	}
	var appended []string
	for _, e := range p.Extra {
		k := lineKey(e)
		replaced := false
		if !alwaysAppended[k] {
			for i, g := range global {
				if lineKey(g) == k {
					global[i] = strings.TrimSpace(e)
					replaced = true
					break
				}
			}
		}
		if !replaced {
			appended = append(appended, strings.TrimSpace(e))
		}
	}
	var b strings.Builder
	b.WriteString("# generated by slurmd-go/integration/cluster; do not edit\n")
	for _, g := range global {
		b.WriteString(g + "\n")
	}
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=%s NodeHostname=localhost Port=%d %s", n.Name, orLoopback(p.NodeAddrs[n.Name]), n.Port, p.HW.NodeLineAttrs())
		if p.NodeExtra != "" {
			b.WriteString(" " + p.NodeExtra)
		}
		b.WriteString(" State=UNKNOWN\n")
	}
	b.WriteString("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n")
	for _, a := range appended {
		b.WriteString(a + "\n")
	}
	return b.String()
}
