package slurmconf

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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

// build is _validate_and_set_defaults for the keys a slurmd uses, followed
// by the node, partition and controller tables.
func (p *parser) build(file string) (*Config, error) {
	c := &Config{File: file, Includes: p.includes, Hash: p.hash, Raw: p.top}
	b := &builder{p: p, c: c, file: file}

	cn, ok := p.top["clustername"]
	if !ok || cn == "" {
		return nil, b.invalid("clustername", "ClusterName needs to be specified")
	}
	c.ClusterName = strings.ToLower(cn)

	if err := b.ctldHosts(); err != nil {
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
	return c, nil
}

type builder struct {
	p    *parser
	c    *Config
	file string
}

// invalid makes an ErrInvalid error located at key's line when it has one.
func (b *builder) invalid(key, format string, args ...any) error {
	at := b.p.topLine[key]
	if at.file == "" {
		at.file = b.file
	}
	return perr(at.file, at.line, ErrInvalid, format, args...)
}

func (b *builder) warn(format string, args ...any) {
	b.c.Warnings = append(b.c.Warnings, fmt.Sprintf(format, args...))
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
			if _, ok := b.p.top[strings.ToLower(k)]; ok {
				b.warn("Ignoring %s since SlurmctldHost is set.", k)
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
		return CtldHost{}, fmt.Errorf("Bad value %q for SlurmctldHost", v)
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

// users resolves SlurmUser and SlurmdUser; like slurmctld, an unknown user
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
			return b.invalid(strings.ToLower(u.key), "Invalid user for %s %s", u.key, v)
		}
		*u.name, *u.id = v, id
	}
	return nil
}

func (b *builder) scalars() error {
	c := b.c
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
	c.SlurmdParameters = b.str("SlurmdParameters", "")
	c.ConfigOverrides = strings.Contains(strings.ToLower(c.SlurmdParameters), "config_override")

	c.SlurmdTimeout = b.secs("SlurmdTimeout", DefaultSlurmdTimeout)
	c.MessageTimeout = b.secs("MessageTimeout", DefaultMessageTimeout)
	c.BatchStartTimeout = b.secs("BatchStartTimeout", DefaultBatchStartTimeout)
	c.TCPTimeout = b.secs("TCPTimeout", DefaultTCPTimeout)
	c.KillWait = b.secs("KillWait", DefaultKillWait)
	c.UnkillableStepTimeout = b.secs("UnkillableStepTimeout", DefaultUnkillableTimeout)
	c.UnkillableStepProgram = b.str("UnkillableStepProgram", "")
	c.PrologEpilogTimeout = uint16(b.num("PrologEpilogTimeout", 16, DefaultPrologEpilogTimeout))
	c.TreeWidth = uint16(b.num("TreeWidth", 16, DefaultTreeWidth))
	if c.TreeWidth == 0 {
		b.warn("TreeWidth=0 is invalid")
		c.TreeWidth = DefaultTreeWidth
	}

	c.AuthType = b.str("AuthType", DefaultAuthType)
	c.AuthAltTypes = b.str("AuthAltTypes", "")
	c.AuthInfo = parseAuthInfo(b.str("AuthInfo", ""), b.warn)
	c.CredType = b.str("CredType", "")
	if c.CredType == "" {
		if v, ok := b.p.top["cryptotype"]; ok {
			c.CredType = strings.Replace(v, "crypto", "cred", 1)
		} else {
			c.CredType = DefaultCredType
		}
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
		return b.invalid("communicationparameters", "Both IPv4 and IPv6 support disabled, cannot communicate")
	}
	c.JobCredentialPrivateKey = b.str("JobCredentialPrivateKey", "")
	c.JobCredentialPublicCertificate = b.str("JobCredentialPublicCertificate", "")

	c.Prolog = b.str("Prolog", "")
	c.Epilog = b.str("Epilog", "")
	c.TaskProlog = b.str("TaskProlog", "")
	c.TaskEpilog = b.str("TaskEpilog", "")
	c.HealthCheckProgram = b.str("HealthCheckProgram", "")
	c.HealthCheckInterval = b.secs("HealthCheckInterval", 0)
	c.HealthCheckNodeState = b.str("HealthCheckNodeState", "")
	c.RebootProgram = b.str("RebootProgram", "")

	c.TmpFS = b.str("TmpFS", DefaultTmpFS)
	c.ProctrackType = b.str("ProctrackType", DefaultProctrackType)
	c.TaskPlugin = b.str("TaskPlugin", DefaultTaskPlugin)
	c.TaskPluginParam = b.str("TaskPluginParam", "")
	c.JobAcctGatherType = b.str("JobAcctGatherType", DefaultJobAcctGatherType)
	c.JobAcctGatherFrequency = b.str("JobAcctGatherFrequency", DefaultJobAcctGatherFreq)
	c.JobAcctGatherParams = b.str("JobAcctGatherParams", "")
	c.JobContainerType = b.str("JobContainerType", DefaultJobContainerType)
	c.SelectType = b.str("SelectType", DefaultSelectType)
	c.SelectTypeParameters = b.str("SelectTypeParameters", "")
	c.PreemptMode = b.str("PreemptMode", "")
	c.SwitchType = b.str("SwitchType", DefaultSwitchType)
	c.LaunchParameters = b.str("LaunchParameters", "")
	c.MpiDefault = b.str("MpiDefault", DefaultMpiDefault)
	if c.MpiDefault == "openmpi" {
		c.MpiDefault = "none"
	}
	if g := b.str("GresTypes", ""); g != "" {
		c.GresTypes = strings.Split(g, ",")
	}
	c.PlugStackConfig = b.str("PlugStackConfig", filepath.Join(filepath.Dir(b.file), "plugstack.conf"))
	c.ReturnToService = uint16(b.num("ReturnToService", 16, 0))
	c.MaxTasksPerNode = uint16(b.num("MaxTasksPerNode", 16, DefaultMaxTasksPerNode))
	c.JobFileAppend = b.num("JobFileAppend", 16, 0) != 0
	c.UsePAM = b.boolean("UsePAM")
	c.DebugFlags = b.str("DebugFlags", "")

	c.PropagateResourceLimitsExcept = b.str("PropagateResourceLimitsExcept", "")
	if c.PropagateResourceLimitsExcept == "" {
		c.PropagateResourceLimits = b.str("PropagateResourceLimits", "ALL")
	}

	if v, ok := b.p.top["prologflags"]; ok {
		f, err := parsePrologFlags(v)
		if err != nil {
			return b.invalid("prologflags", "%v", err)
		}
		c.PrologFlags = f
	}
	if strings.Contains(c.JobContainerType, "tmpfs") && c.PrologFlags&PrologContain == 0 {
		return b.invalid("jobcontainertype", "PrologFlags=Contain is required for use with job_container/tmpfs")
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
	names := []string{"quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5"}
	for i, n := range names {
		if strings.EqualFold(v, n) {
			return LogLevel(i), true
		}
	}
	return 0, false
}

// parsePrologFlags is prolog_str2flags plus read_config.c's checks.
func parsePrologFlags(v string) (PrologFlags, error) {
	var f PrologFlags
	for _, tok := range strings.Split(v, ",") {
		switch strings.ToLower(tok) {
		case "":
			// strtok skips empty tokens
		case "alloc":
			f |= PrologAlloc
		case "contain":
			f |= PrologAlloc | PrologContain
		case "deferbatch":
			f |= PrologDeferBatch
		case "nohold":
			f |= PrologNoHold
		case "serial":
			f |= PrologSerial
		case "x11":
			f |= PrologAlloc | PrologContain | PrologX11
		default:
			return 0, fmt.Errorf("PrologFlags invalid: %s (Invalid PrologFlag: %s)", v, tok)
		}
	}
	if f&PrologNoHold != 0 && f&PrologContain != 0 {
		return 0, fmt.Errorf("PrologFlags invalid combination: NoHold cannot be combined with Contain and/or X11")
	}
	if f&PrologNoHold != 0 {
		f |= PrologAlloc
	}
	return f, nil
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
