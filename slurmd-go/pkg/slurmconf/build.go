package slurmconf

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// hostnameFunc is os.Hostname; tests replace it.
var hostnameFunc = os.Hostname

// lookupUID resolves a user name (or numeric uid) like uid_from_string.
var lookupUID = func(name string) (uint32, error) {
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, err
	}
	return uint32(n), nil
}

// maxSlurmNodes is MAX_SLURM_NODES (slurm.h, 24.11).
const maxSlurmNodes = 65536

// build is _validate_and_set_defaults for the keys a slurmd uses, followed
// by the node, partition and controller tables, as the parser's release
// does them.
func (p *parser) build(file string) (*Config, error) {
	c := &Config{File: file, Includes: p.includes, Version: p.rel.v, Hash: p.hash, Raw: p.top}
	b := &builder{p: p, r: p.rel, c: c, file: file}

	cn, ok := p.top["clustername"]
	if !ok || cn == "" {
		return nil, b.invalid("clustername", "ClusterName needs to be specified")
	}
	c.ClusterName = strings.ToLower(cn)

	if b.r.check(V2411, 0) {
		if err := b.nodeSetsVsNodes(); err != nil {
			return nil, err
		}
	}
	if err := b.ctldHosts(); err != nil {
		return nil, err
	}
	if err := b.removedOptions(); err != nil {
		return nil, err
	}
	if err := b.ports(); err != nil {
		return nil, err
	}
	if err := b.users(); err != nil {
		return nil, err
	}
	if err := b.scalars(); err != nil {
		return nil, err
	}
	if err := b.nodes(); err != nil {
		return nil, err
	}
	b.partitions()
	c.Warnings = p.warnings
	return c, nil
}

type builder struct {
	p    *parser
	r    release
	c    *Config
	file string
}

// at is where key was set, or the file when it was not.
func (b *builder) at(key string) pos {
	at := b.p.topLine[key]
	if at.file == "" {
		at.file = b.file
	}
	return at
}

// invalid is an error-level ErrInvalid at key's line (slurmd then logs
// "Unable to process configuration file").
func (b *builder) invalid(key, format string, args ...any) error {
	at := b.at(key)
	return perr(at.file, at.line, ErrInvalid, format, args...)
}

// fatal is an ErrInvalid slurmd logs with fatal() at key's line.
func (b *builder) fatal(key, format string, args ...any) error {
	at := b.at(key)
	return pfatal(at.file, at.line, ErrInvalid, format, args...)
}

// warn records an error-level message about key that slurmd survives.
func (b *builder) warn(key, format string, args ...any) {
	b.p.warn(b.at(key), "error", format, args...)
}

func (b *builder) has(key string) bool {
	_, ok := b.p.top[strings.ToLower(key)]
	return ok
}

func (b *builder) str(key, def string) string {
	if v, ok := b.p.top[strings.ToLower(key)]; ok {
		return v
	}
	return def
}

// num returns a key already type-checked by the parser.
func (b *builder) num(key string, bits int, def uint64) uint64 {
	v, ok := b.p.top[strings.ToLower(key)]
	if !ok {
		return def
	}
	n, _ := parseUint(key, v, bits)
	return n
}

func (b *builder) secs(key string, def time.Duration) time.Duration {
	v, ok := b.p.top[strings.ToLower(key)]
	if !ok {
		return def
	}
	n, _ := parseUint(key, v, 16)
	return time.Duration(n) * time.Second
}

func (b *builder) boolean(key string) bool {
	v, ok := b.p.top[strings.ToLower(key)]
	if !ok {
		return false
	}
	t, _ := parseBool(key, v)
	return t
}

// plugin is a plugin-type key: 22.05 fills in its "*/none" default; from
// 24.11 an unset key or any value containing "none" means no plugin ("").
func (b *builder) plugin(key, def2205 string) string {
	v, ok := b.p.top[strings.ToLower(key)]
	if !b.r.atLeast(V2411) {
		if !ok {
			return def2205
		}
		return v
	}
	if containsFold(v, "none") {
		return ""
	}
	return v
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// nodeSetsVsNodes is 24.11's _validate_conf_nodeset_vs_nodenames.
func (b *builder) nodeSetsVsNodes() error {
	for _, set := range b.p.sets {
		for _, n := range b.p.nodes {
			names, err := hostlist.Expand(n.name)
			if err != nil {
				continue
			}
			for _, name := range names {
				if name == set.name {
					return perr(set.file, set.line, ErrInvalid, "NodeSet with name %s overlaps with an existing NodeName", set.name)
				}
			}
		}
	}
	return nil
}

// ctldHosts is _load_slurmctld_host.
func (b *builder) ctldHosts() error {
	var hosts []CtldHost
	if len(b.p.ctlds) > 0 {
		for _, s := range b.p.ctlds {
			h, err := parseCtldHost(s.name)
			if err != nil {
				return perr(s.file, s.line, ErrInvalid, "%v", err)
			}
			hosts = append(hosts, h)
		}
		for _, k := range []string{"ControlMachine", "ControlAddr", "BackupController", "BackupAddr"} {
			if b.has(k) {
				b.warn(strings.ToLower(k), "Ignoring %s since SlurmctldHost is set.", k)
			}
		}
	} else {
		cm, ok := b.p.top["controlmachine"]
		if !ok {
			return b.invalid("", "No SlurmctldHost defined.")
		}
		ca, hasAddr := b.p.top["controladdr"]
		if !hasAddr && strings.Contains(cm, ",") {
			return b.invalid("controlmachine", "ControlMachine has multiple host names, so ControlAddr must be specified.")
		}
		hosts = append(hosts, CtldHost{Name: cm, Addr: ca})
		bc, hasBackup := b.p.top["backupcontroller"]
		ba, hasBackupAddr := b.p.top["backupaddr"]
		if hasBackupAddr && !hasBackup {
			return b.invalid("backupaddr", "BackupAddr specified without BackupController")
		}
		if hasBackup {
			hosts = append(hosts, CtldHost{Name: bc, Addr: ba})
		}
	}
	for i := range hosts {
		if hosts[i].Addr == "" {
			hosts[i].Addr = hosts[i].Name
		}
		if strings.EqualFold(hosts[i].Name, "localhost") {
			hn, err := hostnameFunc()
			if err != nil {
				return b.invalid("", "getnodename: %v", err)
			}
			hosts[i].Name, _, _ = strings.Cut(hn, ".")
		}
		for j := 0; j < i; j++ {
			if hosts[i].Name == hosts[j].Name {
				return b.invalid("", "Duplicate SlurmctldHost records: %s", hosts[i].Name)
			}
		}
	}
	b.c.SlurmctldHost = hosts
	return nil
}

// parseCtldHost splits "name(addr)" as _parse_slurmctld_host.
func parseCtldHost(v string) (CtldHost, error) {
	open, close := strings.IndexByte(v, '('), strings.IndexByte(v, ')')
	if (open >= 0) != (close >= 0) ||
		(close >= 0 && close != len(v)-1) ||
		(close >= 0 && close != strings.LastIndexByte(v, ')')) {
		return CtldHost{}, fmt.Errorf("Bad value \"%s\" for SlurmctldHost", v)
	}
	if open < 0 {
		return CtldHost{Name: v, Addr: v}, nil
	}
	addr := v[open+1:]
	if k := strings.IndexByte(addr, ')'); k >= 0 {
		addr = addr[:k]
	}
	return CtldHost{Name: v[:open], Addr: addr}, nil
}

// removedOptions are the keys still in a release's table that its
// _validate_and_set_defaults refuses outright, and the other plain fatal
// combinations of options.
func (b *builder) removedOptions() error {
	if b.has("AccountingStorageLoc") && b.r.check(V2205, V2605) {
		return b.fatal("accountingstorageloc", "The AccountingStorageLoc option has been removed. It is safe to remove from your configuration.")
	}
	if b.has("AccountingStoreJobComment") {
		return b.fatal("accountingstorejobcomment", "The AccountingStoreJobComment option has been removed, please use AccountingStoreFlags=job_comment option instead.")
	}
	if b.has("SallocDefaultCommand") {
		return b.fatal("sallocdefaultcommand", "SallocDefaultCommand has been removed. Please consider setting LaunchParameters=use_interactive_step instead.")
	}
	if b.has("FirstJobId") && b.num("FirstJobId", 32, 1) == 0 {
		return b.fatal("firstjobid", "FirstJobId cannot be zero")
	}
	if lp := b.str("LaunchParameters", ""); containsFold(lp, "enable_nss_slurm") && containsFold(lp, "disable_send_gids") {
		return b.fatal("launchparameters", "LaunchParameters options enable_nss_slurm and disable_send_gids are mutually exclusive.")
	}
	if jp := b.str("JobAcctGatherParams", ""); containsFold(jp, "UsePSS") && containsFold(jp, "NoShared") {
		return b.fatal("jobacctgatherparams", "JobAcctGatherParams options UsePSS and NoShared are mutually exclusive.")
	}
	if st := b.str("AccountingStorageType", ""); !containsFold(st, "none") && containsFold(st, "mysql") {
		return b.fatal("accountingstoragetype", "AccountingStorageType=accounting_storage/mysql only permitted in SlurmDBD.")
	}
	return nil
}

// ports handles SlurmctldPort ("6817" or "6817-6818") and SlurmdPort.
func (b *builder) ports() error {
	c := b.c
	c.SlurmctldPort, c.SlurmctldPortCount = DefaultSlurmctldPort, 1
	if v, ok := b.p.top["slurmctldport"]; ok {
		lo, rest, ok1 := strtol10(v)
		if !ok1 || lo <= 0 || lo > 0xffff {
			return b.invalid("slurmctldport", "Invalid SlurmctldPort %s", v)
		}
		c.SlurmctldPort = uint16(lo)
		switch {
		case strings.HasPrefix(rest, "-"):
			hi, _, _ := strtol10(rest[1:])
			if hi <= lo || hi > 0xffff {
				return b.invalid("slurmctldport", "Invalid SlurmctldPort %s", v)
			}
			c.SlurmctldPortCount = uint16(hi + 1 - lo)
		case rest != "":
			return b.invalid("slurmctldport", "Invalid SlurmctldPort %s", v)
		}
	}
	port := b.num("SlurmdPort", 32, DefaultSlurmdPort)
	if port == 0 || port > 0xffff {
		return b.invalid("slurmdport", "Invalid SlurmdPort %d", port)
	}
	c.SlurmdPort = uint16(port)
	return nil
}

// strtol10 is strtol(s, &end, 10) for non-huge values.
func strtol10(s string) (int64, string, bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var n int64
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if n > 1<<40 {
			return 0, s[i:], false
		}
		n = n*10 + int64(s[i]-'0')
	}
	if i == start {
		return 0, s, true
	}
	if neg {
		n = -n
	}
	return n, s[i:], true
}

// users resolves SlurmUser and SlurmdUser; like slurmd, an unknown user
// is an error.
func (b *builder) users() error {
	c := b.c
	for _, u := range []struct {
		key  string
		name *string
		id   *uint32
	}{{"SlurmUser", &c.SlurmUser, &c.SlurmUserID}, {"SlurmdUser", &c.SlurmdUser, &c.SlurmdUserID}} {
		v, ok := b.p.top[strings.ToLower(u.key)]
		if !ok {
			*u.name, *u.id = DefaultSlurmUser, 0
			continue
		}
		id, err := lookupUID(v)
		if err != nil {
			return b.invalid(strings.ToLower(u.key), "Invalid user for %s %s, ignored", u.key, v)
		}
		*u.name, *u.id = v, id
	}
	return nil
}

func (b *builder) scalars() error {
	c, r := b.c, b.r
	c.SlurmctldAddr = b.str("SlurmctldAddr", "")
	c.SlurmctldTimeout = b.secs("SlurmctldTimeout", 120*time.Second)
	c.SlurmdSpoolDir = b.str("SlurmdSpoolDir", DefaultSpoolDir)
	c.SlurmdPidFile = b.str("SlurmdPidFile", DefaultSlurmdPidFile)
	c.SlurmdLogFile = b.str("SlurmdLogFile", "")
	c.SlurmdDebug = DefaultLogLevel
	if v, ok := b.p.top["slurmddebug"]; ok {
		lvl, ok := logLevel(v)
		if !ok {
			return b.invalid("slurmddebug", "Invalid SlurmdDebug %s", v)
		}
		c.SlurmdDebug = lvl
	}
	c.SlurmdSyslogDebug = LogEnd
	if v, ok := b.p.top["slurmdsyslogdebug"]; ok {
		lvl, ok := logLevel(v)
		if !ok {
			return b.invalid("slurmdsyslogdebug", "Invalid SlurmdSyslogDebug %s", v)
		}
		c.SlurmdSyslogDebug = lvl
	}
	c.SlurmdParameters = b.str("SlurmdParameters", "")
	c.ConfigOverrides = containsFold(c.SlurmdParameters, "config_override")

	c.SlurmdTimeout = b.secs("SlurmdTimeout", DefaultSlurmdTimeout)
	c.MessageTimeout = b.secs("MessageTimeout", DefaultMessageTimeout)
	if c.MessageTimeout > 100*time.Second {
		b.warn("messagetimeout", "MessageTimeout is too high for effective fault-tolerance")
	}
	c.BatchStartTimeout = b.secs("BatchStartTimeout", DefaultBatchStartTimeout)
	c.TCPTimeout = b.secs("TCPTimeout", DefaultTCPTimeout)
	c.KillWait = b.secs("KillWait", DefaultKillWait)
	b.unkillable()
	c.UnkillableStepProgram = b.str("UnkillableStepProgram", "")
	b.scriptTimeouts()
	c.TreeWidth = DefaultTreeWidth
	if r.atLeast(V2411) {
		c.TreeWidth = DefaultTreeWidth2411
	}
	if b.has("TreeWidth") {
		if w := uint16(b.num("TreeWidth", 16, 0)); w != 0 {
			c.TreeWidth = w
		} else {
			b.warn("treewidth", "TreeWidth=0 is invalid")
		}
	}

	c.AuthType = b.str("AuthType", DefaultAuthType)
	c.AuthAltTypes = b.str("AuthAltTypes", "")
	c.AuthInfo = parseAuthInfo(b.str("AuthInfo", ""), func(f string, a ...any) { b.warn("authinfo", f, a...) })
	c.CredType = b.str("CredType", "")
	if c.CredType == "" {
		if v, ok := b.p.top["cryptotype"]; ok {
			c.CredType = strings.Replace(v, "crypto", "cred", 1)
		} else {
			c.CredType = DefaultCredType
		}
	}
	if r.atLeast(V2411) {
		c.HashPlugin = b.str("HashPlugin", DefaultHashPlugin)
		c.TLSType = b.str("TLSType", DefaultTLSType)
		c.CertmgrType = b.str("CertmgrType", "")
	}
	comm := b.str("CommunicationParameters", "")
	// TopologyParam's legacy NoInAddrAny/NoCtldInAddrAny move to
	// CommunicationParameters (read_config.c).
	if tp := strings.ToLower(b.str("TopologyParam", "")); tp != "" {
		for _, legacy := range []string{"NoInAddrAny", "NoCtldInAddrAny"} {
			if strings.Contains(tp, strings.ToLower(legacy)) && !(CommParams{comm}).Has(legacy) {
				if comm != "" {
					comm += ","
				}
				comm += legacy
			}
		}
	}
	c.CommunicationParameters = CommParams{Raw: comm}
	if c.CommunicationParameters.DisableIPv4() && !c.CommunicationParameters.EnableIPv6() {
		return b.fatal("communicationparameters", "Both IPv4 and IPv6 support disabled, cannot communicate")
	}
	c.JobCredentialPrivateKey = b.str("JobCredentialPrivateKey", "")
	c.JobCredentialPublicCertificate = b.str("JobCredentialPublicCertificate", "")

	b.scripts()
	c.TaskProlog = b.str("TaskProlog", "")
	c.TaskEpilog = b.str("TaskEpilog", "")
	c.HealthCheckProgram = b.str("HealthCheckProgram", "")
	c.HealthCheckInterval = b.secs("HealthCheckInterval", 0)
	c.HealthCheckNodeState = b.str("HealthCheckNodeState", "")
	c.RebootProgram = b.str("RebootProgram", "")

	c.TmpFS = b.str("TmpFS", DefaultTmpFS)
	c.ProctrackType = b.str("ProctrackType", DefaultProctrackType)
	c.TaskPlugin = b.plugin("TaskPlugin", DefaultTaskPlugin)
	if r.atLeast(V2411) {
		c.TaskPlugin = sortTaskPlugins(c.TaskPlugin)
	}
	c.TaskPluginParam = b.str("TaskPluginParam", "")
	c.JobAcctGatherType = b.plugin("JobAcctGatherType", DefaultJobAcctGatherType)
	c.JobAcctGatherFrequency = b.str("JobAcctGatherFrequency", DefaultJobAcctGatherFreq)
	c.JobAcctGatherParams = b.str("JobAcctGatherParams", "")
	if r.atLeast(V2605) {
		ns := b.str("NamespaceType", "")
		if !b.has("NamespaceType") {
			ns = b.str("JobContainerType", "")
		}
		if containsFold(ns, "none") {
			ns = ""
		}
		c.NamespaceType = ns
	} else {
		c.JobContainerType = b.plugin("JobContainerType", DefaultJobContainerType)
	}
	c.SelectType = b.str("SelectType", DefaultSelectType)
	if r.atLeast(V2411) {
		c.SelectType = b.str("SelectType", DefaultSelectType2411)
	}
	if v, ok := b.p.top["suspendtime"]; ok && r.check(V2411, 0) && !suspendTimeOK(v) {
		return b.invalid("suspendtime", "Bad value \"%s\" for SuspendTime", v)
	}
	if err := b.maxNodeCount(); err != nil {
		return err
	}
	c.SelectTypeParameters = b.str("SelectTypeParameters", "")
	c.PreemptMode = b.str("PreemptMode", "")
	c.SwitchType = b.plugin("SwitchType", DefaultSwitchType)
	if err := b.topology(); err != nil {
		return err
	}
	c.LaunchParameters = b.str("LaunchParameters", "")
	c.MpiDefault = b.mpiDefault()
	if g := b.str("GresTypes", ""); g != "" {
		c.GresTypes = strings.Split(g, ",")
	}
	c.PlugStackConfig = b.str("PlugStackConfig", filepath.Join(filepath.Dir(b.file), "plugstack.conf"))
	c.PluginDir = b.str("PluginDir", DefaultPluginDir)
	c.ReturnToService = uint16(b.num("ReturnToService", 16, 0))
	c.MaxTasksPerNode = uint16(b.num("MaxTasksPerNode", 16, DefaultMaxTasksPerNode))
	c.JobFileAppend = b.num("JobFileAppend", 16, 0) != 0
	c.UsePAM = b.boolean("UsePAM")
	c.DebugFlags = b.str("DebugFlags", "")
	c.SchedulerParameters = b.str("SchedulerParameters", "")
	c.SlurmctldParameters = b.str("SlurmctldParameters", "")
	c.StateSaveLocation = b.str("StateSaveLocation", DefaultStateSaveLocation)
	c.GetEnvTimeout = uint16(b.num("GetEnvTimeout", 16, DefaultGetEnvTimeout))

	c.PropagateResourceLimitsExcept = b.str("PropagateResourceLimitsExcept", "")
	if c.PropagateResourceLimitsExcept == "" {
		c.PropagateResourceLimits = b.str("PropagateResourceLimits", "ALL")
	}
	if err := b.prologFlags(); err != nil {
		return err
	}
	return b.containment()
}

// unkillable is UnkillableStepTimeout: 60 s in 22.05; from 24.11 at least
// five MessageTimeouts, and slurmd complains about a smaller setting.
func (b *builder) unkillable() {
	c := b.c
	if !b.r.atLeast(V2411) {
		c.UnkillableStepTimeout = b.secs("UnkillableStepTimeout", DefaultUnkillableTimeout)
		return
	}
	msg := uint32(c.MessageTimeout / time.Second)
	def := msg * 5
	if !b.has("UnkillableStepTimeout") {
		switch {
		case def > 0xffff:
			b.warn("messagetimeout", "The default value for UnkillableStepTimeout of MessageTimeout*5 (%d) is larger than the maximum allowed value for UnkillableStepTimeout (%d), setting UnkillableStepTimeout to the maximum value.", def, 0xffff)
			c.UnkillableStepTimeout = 0xffff * time.Second
		default:
			c.UnkillableStepTimeout = time.Duration(max(uint32(DefaultUnkillableTimeout/time.Second), def)) * time.Second
		}
		return
	}
	c.UnkillableStepTimeout = b.secs("UnkillableStepTimeout", 0)
	if set := uint32(c.UnkillableStepTimeout / time.Second); set < def {
		b.warn("unkillablesteptimeout", "UnkillableStepTimeout must be at least 5 times greater than MessageTimeout, otherwise nodes may go down with the reason \"KillTaskFailed\". Current values: UnkillableStepTimeout=%d, MessageTimeout=%d", set, msg)
	}
}

// scriptTimeouts: PrologEpilogTimeout, split into PrologTimeout and
// EpilogTimeout in 26.05 (each falls back to PrologEpilogTimeout).
func (b *builder) scriptTimeouts() {
	c := b.c
	c.PrologEpilogTimeout = uint16(b.num("PrologEpilogTimeout", 16, DefaultPrologEpilogTimeout))
	c.PrologTimeout, c.EpilogTimeout = c.PrologEpilogTimeout, c.PrologEpilogTimeout
	if b.r.atLeast(V2605) {
		c.PrologTimeout = uint16(b.num("PrologTimeout", 16, uint64(c.PrologEpilogTimeout)))
		c.EpilogTimeout = uint16(b.num("EpilogTimeout", 16, uint64(c.PrologEpilogTimeout)))
	}
}

// scripts: Prolog/Epilog, one value in 22.05 (last wins), a list from 24.11.
func (b *builder) scripts() {
	c := b.c
	if b.r.atLeast(V2411) {
		c.Prologs = append([]string(nil), b.p.lists["prolog"]...)
		c.Epilogs = append([]string(nil), b.p.lists["epilog"]...)
		if len(c.Prologs) > 0 {
			c.Prolog = c.Prologs[0]
		}
		if len(c.Epilogs) > 0 {
			c.Epilog = c.Epilogs[0]
		}
		return
	}
	c.Prolog = b.str("Prolog", "")
	c.Epilog = b.str("Epilog", "")
	if c.Prolog != "" {
		c.Prologs = []string{c.Prolog}
	}
	if c.Epilog != "" {
		c.Epilogs = []string{c.Epilog}
	}
}

// sortTaskPlugins is 24.11's _sort_task_plugin: names without "task/",
// reverse alphabetical, "task/" put back.
func sortTaskPlugins(v string) string {
	if v == "" {
		return ""
	}
	var names []string
	for _, tok := range strings.Split(v, ",") {
		if tok == "" {
			continue // strtok skips empty tokens
		}
		names = append(names, strings.TrimPrefix(tok, "task/"))
	}
	sort.SliceStable(names, func(i, j int) bool { return names[i] > names[j] })
	for i := range names {
		names[i] = "task/" + names[i]
	}
	return strings.Join(names, ",")
}

// mpiDefault: "openmpi" means none; 22.05 says "none", 24.11 "".
func (b *builder) mpiDefault() string {
	v, ok := b.p.top["mpidefault"]
	if !b.r.atLeast(V2411) {
		if !ok || v == "openmpi" {
			return DefaultMpiDefault
		}
		return v
	}
	if containsFold(v, "none") || containsFold(v, "openmpi") {
		return ""
	}
	return v
}

// maxNodeCount: MaxNodeCount needs select/cons_tres (22.05 only checks a
// non-zero value; 24.11 any value, and caps it).
func (b *builder) maxNodeCount() error {
	if !b.has("MaxNodeCount") {
		return nil
	}
	n := b.num("MaxNodeCount", 32, 0)
	if b.r.atLeast(V2411) && n > maxSlurmNodes {
		return b.invalid("maxnodecount", "Specified MaxNodeCount in slurm.conf (%d) is higher than the maximum allowed (%d)", n, maxSlurmNodes)
	}
	if (n != 0 || b.r.atLeast(V2411)) && !strings.Contains(b.c.SelectType, "cons_tres") {
		return b.invalid("maxnodecount", "MaxNodeCount only compatible with cons_tres")
	}
	return nil
}

// topology is TopologyPlugin with each release's name for "none", and
// 24.11's refusal of select/linear with topology/tree.
func (b *builder) topology() error {
	c := b.c
	v := b.str("TopologyPlugin", "")
	switch {
	case !b.r.atLeast(V2411):
		c.TopologyPlugin = b.str("TopologyPlugin", "topology/none")
	case b.r.atLeast(V2605):
		switch strings.ToLower(v) {
		case "", "none", "default", "topology/none", "topology/default":
			v = "topology/flat"
		}
		c.TopologyPlugin = v
	default:
		if v == "" || containsFold(v, "none") {
			v = "topology/default"
		}
		c.TopologyPlugin = v
	}
	if b.r.check(V2411, 0) && strings.EqualFold(c.SelectType, "select/linear") && strings.EqualFold(c.TopologyPlugin, "topology/tree") {
		return b.fatal("topologyplugin", "select/linear with topology/tree is not supported. Please switch to select/cons_tres or stop using topology/tree.")
	}
	return nil
}

// prologFlags is PrologFlags with read_config.c's checks.
func (b *builder) prologFlags() error {
	v, ok := b.p.top["prologflags"]
	if !ok {
		return nil
	}
	f, bad := parsePrologFlags(v, b.r)
	if bad != "" {
		at := b.at("prologflags")
		return &ParseError{File: at.file, Line: at.line, Err: ErrInvalid,
			Msg: "Invalid PrologFlag: " + bad, Fatal: "PrologFlags invalid: " + v}
	}
	if f&PrologRunInJob != 0 && f&PrologSerial != 0 {
		b.warn("prologflags", "PrologFlag Serial is incompatible with RunInJob")
	}
	if f&PrologNoHold != 0 && f&PrologContain != 0 {
		return b.fatal("prologflags", "PrologFlags invalid combination: NoHold cannot be combined with Contain and/or X11")
	}
	if f&PrologContain != 0 && f&PrologX11 != 0 && b.c.ProctrackType == "proctrack/linuxproc" {
		return b.fatal("prologflags", "Invalid combination: PrologFlags=X11 cannot be combined with proctrack/linuxproc")
	}
	if f&PrologNoHold != 0 {
		f |= PrologAlloc
	}
	b.c.PrologFlags = f
	return nil
}

// containment: a job container or namespace plugin needs PrologFlags=Contain
// (22.05/24.11 job_container/tmpfs; 26.05 any namespace plugin).
func (b *builder) containment() error {
	c := b.c
	if c.PrologFlags&PrologContain != 0 {
		return nil
	}
	if b.r.atLeast(V2605) {
		if c.NamespaceType != "" {
			key := "namespacetype"
			if !b.has("NamespaceType") {
				key = "jobcontainertype"
			}
			return b.fatal(key, "PrologFlags=Contain is required for use with %s", c.NamespaceType)
		}
		return nil
	}
	if strings.Contains(c.JobContainerType, "tmpfs") {
		return b.fatal("jobcontainertype", "PrologFlags=Contain is required for use with job_container/tmpfs")
	}
	return nil
}

// logLevel is log_string2num: a number (atoi of a leading digit run) or a
// level name.
func logLevel(v string) (LogLevel, bool) {
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		n, _, _ := strtol10(v)
		return LogLevel(uint16(n)), true
	}
	for i, n := range logLevelNames {
		if strings.EqualFold(v, n) {
			return LogLevel(i), true
		}
	}
	return 0, false
}

// parsePrologFlags is prolog_str2flags of release r; bad is the first
// token it does not know.
func parsePrologFlags(v string, r release) (f PrologFlags, bad string) {
	for _, tok := range strings.Split(v, ",") {
		switch t := strings.ToLower(tok); {
		case t == "":
			// strtok skips empty tokens
		case t == "alloc":
			f |= PrologAlloc
		case t == "contain":
			f |= PrologAlloc | PrologContain
		case t == "deferbatch":
			f |= PrologDeferBatch
			if r.atLeast(V2605) {
				f |= PrologAlloc
			}
		case t == "nohold":
			f |= PrologNoHold
		case t == "serial":
			f |= PrologSerial
		case t == "x11":
			f |= PrologAlloc | PrologContain | PrologX11
		case t == "runinjob" && r.atLeast(V2411):
			f |= PrologAlloc | PrologContain | PrologRunInJob
		case t == "forcerequeueonfail" && r.atLeast(V2411):
			f |= PrologAlloc | PrologForceRequeueOnFail
		default:
			return 0, tok
		}
	}
	return f, ""
}

// parseAuthInfo reads socket= (or an old-style bare path), ttl= and
// cred_expire= the way the auth and cred code look them up.
func parseAuthInfo(raw string, warn func(string, ...any)) AuthInfo {
	a := AuthInfo{Raw: raw, CredExpire: DefaultCredExpire}
	if raw == "" {
		return a
	}
	if i := strings.Index(raw, "socket="); i >= 0 {
		a.Socket, _, _ = strings.Cut(raw[i+len("socket="):], ",")
	} else if !strings.Contains(raw, "=") {
		a.Socket = raw
	}
	if i := strings.Index(raw, "ttl="); i >= 0 {
		n, _, _ := strtol10(raw[i+len("ttl="):])
		a.TTL = int(max(n, 0))
	}
	if i := strings.Index(raw, "cred_expire="); i >= 0 {
		n, _, _ := strtol10(raw[i+len("cred_expire="):])
		if n < 5 {
			warn("AuthInfo=cred_expire=%d invalid", n)
		} else {
			a.CredExpire = time.Duration(n) * time.Second
		}
	}
	return a
}

func (b *builder) partitions() {
	for _, s := range b.p.parts {
		pt := &Partition{Name: s.name, Raw: map[string]string{}, File: s.file, Line: s.line}
		for k, v := range s.dflt {
			pt.Raw[k] = v
		}
		for k, v := range s.keys {
			pt.Raw[k] = v
		}
		pt.Nodes = pt.Raw["nodes"]
		if v, ok := pt.Raw["default"]; ok {
			pt.Default, _ = parseBool("Default", v)
		}
		pt.State = pt.Raw["state"]
		pt.MaxTime = pt.Raw["maxtime"]
		b.c.partitions = append(b.c.partitions, pt)
	}
	for _, s := range b.p.downs {
		d := DownNodes{Nodes: s.name, Reason: "Set in slurm.conf", State: s.keys["state"]}
		if r, ok := s.keys["reason"]; ok {
			d.Reason = r
		}
		b.c.downNodes = append(b.c.downNodes, d)
	}
	for _, s := range b.p.sets {
		b.c.nodeSets = append(b.c.nodeSets, NodeSet{Name: s.name, Feature: s.keys["feature"], Nodes: s.keys["nodes"]})
	}
}
