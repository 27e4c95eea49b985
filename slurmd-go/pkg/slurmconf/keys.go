package slurmconf

import "strings"

// kind is the value type Slurm checks a key against (the s_p_options_t
// tables of read_config.c and interfaces/cgroup.c).
type kind int

const (
	kAbsent  kind = iota // not a key of that release
	kString              // S_P_STRING
	kUint16              // S_P_UINT16
	kUint32              // S_P_UINT32
	kUint64              // S_P_UINT64
	kLong                // S_P_LONG
	kBool                // S_P_BOOLEAN
	kFloat               // S_P_FLOAT (cgroup.conf)
	kList                // S_P_ARRAY of strings: every line is kept (Prolog from 24.11)
	kSection             // S_P_ARRAY with a line parser: NodeName, PartitionName, ...
	kDefunct             // accepted unchecked and ignored; slurmd logs "... is defunct"
)

// era is the kind a key has from release since on.
type era struct {
	since uint16
	kind  kind
}

// keyInfo is one key of a table: its canonical spelling (Slurm prints it
// in messages) and its kind per release, oldest first.
type keyInfo struct {
	name string
	eras []era
}

// keyOpt changes a key from some release on.
type keyOpt func(*keyInfo)

// added: the key first exists in release v (unknown before).
func added(v uint16) keyOpt {
	return func(k *keyInfo) { k.eras[0].since = v }
}

// defunct: from release v the key is accepted and ignored.
func defunct(v uint16) keyOpt { return becomes(v, kDefunct) }

// removed: from release v the key is unknown again.
func removed(v uint16) keyOpt { return becomes(v, kAbsent) }

// becomes: from release v the key has kind k.
func becomes(v uint16, k kind) keyOpt {
	return func(ki *keyInfo) { ki.eras = append(ki.eras, era{v, k}) }
}

func key(name string, k kind, opts ...keyOpt) keyInfo {
	ki := keyInfo{name: name, eras: []era{{V2205, k}}}
	for _, o := range opts {
		o(&ki)
	}
	return ki
}

// keyTable indexes keys by lower-cased name (Slurm compares keys without case).
type keyTable map[string]keyInfo

func table(keys ...keyInfo) keyTable {
	t := make(keyTable, len(keys))
	for _, k := range keys {
		t[strings.ToLower(k.name)] = k
	}
	return t
}

// lookup returns the key's canonical name and kind in release r; ok is false
// when r does not know the key. A lenient read takes the newest kind that is
// neither absent nor defunct, so a key any release reads is read; a key no
// release reads any more is defunct.
func (t keyTable) lookup(name string, r release) (string, kind, bool) {
	ki, ok := t[strings.ToLower(name)]
	if !ok {
		return "", kAbsent, false
	}
	k := kAbsent
	if r.lenient() {
		for _, e := range ki.eras {
			if e.kind != kAbsent && e.kind != kDefunct {
				k = e.kind
			} else if e.kind == kDefunct && k == kAbsent {
				k = kDefunct
			}
		}
	} else {
		for _, e := range ki.eras {
			if e.since <= r.v {
				k = e.kind
			}
		}
	}
	return ki.name, k, k != kAbsent
}

// topKeys are the top-level keys of slurm.conf (slurm_conf_options[] in
// src/common/read_config.c of 22.05.8, 24.11.5 and 26.05). Section keys
// (kSection) start a line whose further keys are in the tables below.
var topKeys = table(
	key("AccountingStorageBackupHost", kString),
	key("AccountingStorageEnforce", kString),
	key("AccountingStorageExternalHost", kString),
	key("AccountingStorageHost", kString),
	key("AccountingStorageLoc", kString, removed(V2605)),
	key("AccountingStorageParameters", kString),
	key("AccountingStoragePass", kString),
	key("AccountingStoragePort", kUint16),
	key("AccountingStorageTRES", kString),
	key("AccountingStorageType", kString),
	key("AccountingStorageUser", kString, defunct(V2605)),
	key("AccountingStoreFlags", kString),
	key("AccountingStoreJobComment", kBool),
	key("AcctGatherEnergyType", kString),
	key("AcctGatherFilesystemType", kString),
	key("AcctGatherInfinibandType", kString),
	key("AcctGatherInterconnectType", kString),
	key("AcctGatherNodeFreq", kUint16),
	key("AcctGatherProfileType", kString),
	key("AllowSpecResourcesUsage", kBool),
	key("AuthAltParameters", kString),
	key("AuthAltTypes", kString),
	key("AuthInfo", kString),
	key("AuthType", kString),
	key("BackupAddr", kString),
	key("BackupController", kString),
	key("BatchStartTimeout", kUint16),
	key("BcastExclude", kString),
	key("BcastParameters", kString),
	key("BurstBufferParameters", kString),
	key("BurstBufferType", kString),
	key("CertgenParameters", kString, added(V2605)),
	key("CertgenType", kString, added(V2605)),
	key("CertmgrParameters", kString, added(V2411)),
	key("CertmgrType", kString, added(V2411)),
	key("CliFilterParameters", kString, added(V2605)),
	key("CliFilterPlugins", kString),
	key("ClusterName", kString),
	key("CommunicationParameters", kString),
	key("CompleteWait", kUint16),
	key("ControlAddr", kString),
	key("ControlMachine", kString),
	key("CoreSpecPlugin", kString, defunct(V2411)),
	key("CpuFreqDef", kString),
	key("CpuFreqGovernors", kString),
	key("CredType", kString),
	key("CryptoType", kString),
	key("DataParserParameters", kString, added(V2411)),
	key("DebugFlags", kString),
	key("DefCPUPerGPU", kUint64),
	key("DefMemPerCPU", kUint64),
	key("DefMemPerGPU", kUint64),
	key("DefMemPerNode", kUint64),
	key("DependencyParameters", kString),
	key("DisableRootJobs", kBool),
	key("DownNodes", kSection),
	key("EioTimeout", kUint16),
	key("EnforcePartLimits", kString),
	key("Epilog", kString, becomes(V2411, kList)),
	key("EpilogMsgTime", kUint32),
	key("EpilogSlurmctld", kString, becomes(V2411, kList)),
	key("EpilogTimeout", kUint16, added(V2605)),
	key("ExtSensorsFreq", kUint16, defunct(V2411)),
	key("ExtSensorsType", kString, defunct(V2411)),
	key("FairShareDampeningFactor", kUint16),
	key("FastSchedule", kUint16),
	key("FederationParameters", kString),
	key("FirstJobId", kUint32),
	key("FrontendName", kSection, removed(V2605)),
	key("GetEnvTimeout", kUint16, defunct(V2605)),
	key("GpuFreqDef", kString),
	key("GresTypes", kString),
	key("GroupUpdateForce", kUint16),
	key("GroupUpdateTime", kUint16),
	key("HashPlugin", kString, added(V2411)),
	key("HealthCheckInterval", kUint16),
	key("HealthCheckNodeState", kString),
	key("HealthCheckProgram", kString),
	key("HealthCheckTimeout", kUint16, added(V2605)),
	key("HttpParserType", kString, added(V2605)),
	key("InactiveLimit", kUint16),
	key("InteractiveStepOptions", kString),
	key("JobAcctGatherFrequency", kString),
	key("JobAcctGatherParams", kString),
	key("JobAcctGatherType", kString),
	key("JobCompHost", kString),
	key("JobCompLoc", kString),
	key("JobCompParams", kString),
	key("JobCompPass", kString),
	key("JobCompPassScript", kString, added(V2605)),
	key("JobCompPort", kUint32),
	key("JobCompType", kString),
	key("JobCompUser", kString),
	key("JobContainerType", kString),
	key("JobCredentialPrivateKey", kString, defunct(V2411)),
	key("JobCredentialPublicCertificate", kString, defunct(V2411)),
	key("JobFileAppend", kUint16),
	key("JobRequeue", kUint16),
	key("JobSubmitPlugins", kString),
	key("KeepAliveTime", kUint32),
	key("KillOnBadExit", kUint16),
	key("KillWait", kUint16),
	key("LaunchParameters", kString),
	key("LaunchType", kString),
	key("LicenseParameters", kString, added(V2605)),
	key("Licenses", kString),
	key("LogTimeFormat", kString),
	key("MailDomain", kString),
	key("MailProg", kString),
	key("MaxArraySize", kUint32),
	key("MaxBatchRequeue", kUint32, added(V2411)),
	key("MaxDBDMsgs", kUint32),
	key("MaxJobCount", kUint32),
	key("MaxJobId", kUint32),
	key("MaxMemPerCPU", kUint64),
	key("MaxMemPerNode", kUint64),
	key("MaxNodeCount", kUint32),
	key("MaxStepCount", kUint32),
	key("MaxTasksPerNode", kUint16),
	key("MCSParameters", kString),
	key("MCSPlugin", kString),
	key("MessageTimeout", kUint16),
	key("MetricsAuthUsers", kString, added(V2605)),
	key("MetricsParameters", kString, added(V2605)),
	key("MetricsType", kString, added(V2605)),
	key("MinJobAge", kUint32),
	key("MpiDefault", kString),
	key("MpiParams", kString),
	key("NamespaceType", kString, added(V2605)),
	key("NodeFeaturesPlugins", kString),
	key("NodeName", kSection),
	key("NodeSet", kSection),
	key("OverTimeLimit", kUint16),
	key("PartitionName", kSection),
	key("PluginDir", kString),
	key("PlugStackConfig", kString),
	key("PowerAction", kSection, added(V2605)),
	key("PowerParameters", kString, defunct(V2411)),
	key("PowerPlugin", kString, defunct(V2411)),
	key("PreemptExemptTime", kString),
	key("PreemptMode", kString),
	key("PreemptParameters", kString, added(V2411)),
	key("PreemptType", kString),
	key("PrEpParameters", kString),
	key("PrEpPlugins", kString),
	key("PriorityCalcPeriod", kString),
	key("PriorityDecayHalfLife", kString),
	key("PriorityFavorSmall", kBool),
	key("PriorityFlags", kString),
	key("PriorityMaxAge", kString),
	key("PriorityParameters", kString),
	key("PrioritySiteFactorParameters", kString),
	key("PrioritySiteFactorPlugin", kString),
	key("PriorityType", kString),
	key("PriorityUsageResetPeriod", kString),
	key("PriorityWeightAge", kUint32),
	key("PriorityWeightAssoc", kUint32),
	key("PriorityWeightFairshare", kUint32),
	key("PriorityWeightJobSize", kUint32),
	key("PriorityWeightPartition", kUint32),
	key("PriorityWeightQOS", kUint32),
	key("PriorityWeightTRES", kString),
	key("PrivateData", kString),
	key("ProctrackType", kString),
	key("Prolog", kString, becomes(V2411, kList)),
	key("PrologEpilogTimeout", kUint16),
	key("PrologFlags", kString),
	key("PrologSlurmctld", kString, becomes(V2411, kList)),
	key("PrologTimeout", kUint16, added(V2605)),
	key("PropagatePrioProcess", kUint16),
	key("PropagateResourceLimits", kString),
	key("PropagateResourceLimitsExcept", kString),
	key("RebootProgram", kString),
	key("ReconfigFlags", kString),
	key("RequeueExit", kString),
	key("RequeueExitHold", kString),
	key("ResumeFailProgram", kString),
	key("ResumeProgram", kString),
	key("ResumeRate", kUint16),
	key("ResumeTimeout", kUint16),
	key("ResvEpilog", kString),
	key("ResvOverRun", kUint16),
	key("ResvProlog", kString),
	key("ReturnToService", kUint16),
	key("RoutePlugin", kString),
	key("SallocDefaultCommand", kString),
	key("SbcastParameters", kString),
	key("SchedulerAuth", kDefunct, removed(V2411)),
	key("SchedulerParameters", kString),
	key("SchedulerTimeSlice", kUint16),
	key("SchedulerType", kString),
	key("ScronParameters", kString),
	key("SelectType", kString),
	key("SelectTypeParameters", kString),
	key("SlurmctldAddr", kString),
	key("SlurmctldDebug", kString),
	key("SlurmctldHost", kSection),
	key("SlurmctldHttpAuthParameters", kString, added(V2605)),
	key("SlurmctldLogFile", kString),
	key("SlurmctldParameters", kString),
	key("SlurmctldPidFile", kString),
	key("SlurmctldPlugstack", kString, removed(V2411)),
	key("SlurmctldPort", kString),
	key("SlurmctldPrimaryOffProg", kString),
	key("SlurmctldPrimaryOnProg", kString),
	key("SlurmctldSyslogDebug", kString),
	key("SlurmctldTimeout", kUint16),
	key("SlurmdDebug", kString),
	key("SlurmdHttpAuthParameters", kString, added(V2605)),
	key("SlurmdLogFile", kString),
	key("SlurmdParameters", kString),
	key("SlurmdPidFile", kString),
	key("SlurmdPort", kUint32),
	key("SlurmdSpoolDir", kString),
	key("SlurmdSyslogDebug", kString),
	key("SlurmdTimeout", kUint16),
	key("SlurmdUser", kString),
	key("SlurmSchedLogFile", kString),
	key("SlurmSchedLogLevel", kUint16),
	key("SlurmUser", kString),
	key("SrunEpilog", kString),
	key("SrunPortRange", kString),
	key("SrunProlog", kString),
	key("StateSaveLocation", kString),
	key("SuspendExcNodes", kString),
	key("SuspendExcParts", kString),
	key("SuspendExcStates", kString, added(V2411)),
	key("SuspendProgram", kString),
	key("SuspendRate", kUint16),
	key("SuspendTime", kString),
	key("SuspendTimeout", kUint16),
	key("SwitchParameters", kString),
	key("SwitchType", kString),
	key("TaskEpilog", kString),
	key("TaskPlugin", kString),
	key("TaskPluginParam", kString),
	key("TaskProlog", kString),
	key("TCPTimeout", kUint16),
	key("TLSParameters", kString, added(V2411)),
	key("TLSType", kString, added(V2411)),
	key("TmpFS", kString),
	key("TopologyParam", kString),
	key("TopologyPlugin", kString),
	key("TrackWCKey", kBool),
	key("TreeWidth", kUint16),
	key("UnkillableStepProgram", kString),
	key("UnkillableStepTimeout", kUint16),
	key("UrlParserType", kString, added(V2605)),
	key("UsePAM", kBool),
	key("VSizeFactor", kUint16),
	key("WaitTime", kUint16),
	key("X11Parameters", kString),
)

// nodeKeys are the keys of a NodeName line (_parse_nodename).
var nodeKeys = table(
	key("BcastAddr", kString),
	key("Boards", kUint16),
	key("CoreSpecCount", kUint16),
	key("CoresPerSocket", kUint16),
	key("CpuBind", kString),
	key("CPUs", kUint16),
	key("CPUSpecList", kString),
	key("Feature", kString),
	key("Features", kString),
	key("Gres", kString),
	key("GresConf", kString, added(V2605)),
	key("MemSpecLimit", kUint64),
	key("NodeAddr", kString),
	key("NodeHostname", kString),
	key("Parameters", kString, added(V2605)),
	key("Port", kString),
	key("Procs", kUint16),
	key("RealMemory", kUint64),
	key("Reason", kString),
	key("RestrictedCoresPerGPU", kUint16, added(V2411)),
	key("Sockets", kUint16),
	key("SocketsPerBoard", kUint16),
	key("State", kString),
	key("SuspendTime", kString, added(V2605)),
	key("ThreadsPerCore", kUint16),
	key("TmpDisk", kUint32),
	key("Topology", kString, added(V2605)),
	key("TRESWeights", kString),
	key("Weight", kUint32),
)

// partitionKeys are the keys of a PartitionName line (_parse_partitionname).
var partitionKeys = table(
	key("AllocNodes", kString),
	key("AllowAccounts", kString),
	key("AllowGroups", kString),
	key("AllowQos", kString),
	key("Alternate", kString),
	key("CpuBind", kString),
	key("Default", kBool),
	key("DefaultTime", kString),
	key("DefCPUPerGPU", kUint64),
	key("DefMemPerCPU", kUint64),
	key("DefMemPerGPU", kUint64),
	key("DefMemPerNode", kUint64),
	key("DenyAccounts", kString),
	key("DenyQos", kString),
	key("DisableRootJobs", kBool),
	key("Exclusive", kString, added(V2605)),
	key("ExclusiveTopo", kBool, added(V2411)),
	key("ExclusiveUser", kBool),
	key("GraceTime", kUint32),
	key("Hidden", kBool),
	key("LLN", kBool),
	key("MaxCPUsPerNode", kUint32),
	key("MaxCPUsPerSocket", kUint32, added(V2411)),
	key("MaxMemPerCPU", kUint64),
	key("MaxMemPerNode", kUint64),
	key("MaxNodes", kUint32),
	key("MaxTime", kString),
	key("MinNodes", kUint32),
	key("Nodes", kString),
	key("OverSubscribe", kString),
	key("OverTimeLimit", kString),
	key("PowerDownOnIdle", kBool, added(V2411)),
	key("PreemptMode", kString),
	key("Priority", kUint16),
	key("PriorityJobFactor", kUint16),
	key("PriorityTier", kUint16),
	key("QOS", kString),
	key("ReqResv", kBool),
	key("ResumeTimeout", kUint16),
	key("RootOnly", kBool),
	key("SelectTypeParameters", kString),
	key("Shared", kString),
	key("State", kString),
	key("SuspendTime", kString),
	key("SuspendTimeout", kUint16),
	key("Topology", kString, added(V2605)),
	key("TRESBillingWeights", kString),
)

var downNodesKeys = table(
	key("Reason", kString),
	key("State", kString),
)

var nodeSetKeys = table(
	key("Feature", kString),
	key("Nodes", kString),
)

// frontendKeys: 22.05 and 24.11 know FrontendName lines, but Debian builds
// without front-end support and every FrontendName line is fatal there;
// only a lenient read parses them.
var frontendKeys = table(
	key("AllowGroups", kString),
	key("AllowUsers", kString),
	key("DenyGroups", kString),
	key("DenyUsers", kString),
	key("FrontendAddr", kString),
	key("Port", kUint16),
	key("Reason", kString),
	key("State", kString),
)

// powerActionKeys are the keys of a PowerAction line (26.05
// _parse_power_action).
var powerActionKeys = table(
	key("Location", kString),
	key("Program", kString),
)

// slurmctldHostKeys is empty: nothing may follow SlurmctldHost=name(addr).
var slurmctldHostKeys = table()
