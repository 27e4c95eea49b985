package gres

import "strings"

// Release protocol versions this package distinguishes (the same numbers
// as slurmconf.V2205..., kept here so that the package needs no import
// for them).
const (
	v2205 uint16 = 0x2600
	v2411 uint16 = 0x2A00
	v2605 uint16 = 0x2D00
)

// Internal config_flags bits: stock's GRES_CONF_* of 22.05 and 24.11 for
// bits 0-15; 26.05 moved bit 14 to UUID, kept here in bit 30 and mapped in
// Bits.
const (
	cfMult        uint32 = 1 << 0
	cfHasFile     uint32 = 1 << 1
	cfHasType     uint32 = 1 << 2
	cfCountOnly   uint32 = 1 << 3
	cfLoaded      uint32 = 1 << 4
	cfEnvNVML     uint32 = 1 << 5
	cfEnvRSMI     uint32 = 1 << 6
	cfEnvOpenCL   uint32 = 1 << 7
	cfEnvDef      uint32 = 1 << 8
	cfShared      uint32 = 1 << 9
	cfOneSharing  uint32 = 1 << 10
	cfEnvOneAPI   uint32 = 1 << 11
	cfExplicit    uint32 = 1 << 12
	cfFromState   uint32 = 1 << 13
	cfGlobalIndex uint32 = 1 << 14 // 24.11
	cfAutodetect  uint32 = 1 << 15
	cfUpdate      uint32 = 1 << 16 // 26.05
	cfMIG         uint32 = 1 << 17 // 26.05
	cfUUID        uint32 = 1 << 30 // 26.05's bit 14

	cfEnvSet = cfEnvNVML | cfEnvRSMI | cfEnvOpenCL | cfEnvOneAPI // GRES_CONF_ENV_SET 0x8E0
)

func (f Flags) bits() uint32 {
	var b uint32
	set := func(on bool, bit uint32) {
		if on {
			b |= bit
		}
	}
	set(f.Multiple, cfMult)
	set(f.HasFile, cfHasFile)
	set(f.HasType, cfHasType)
	set(f.CountOnly, cfCountOnly)
	set(f.EnvNVML, cfEnvNVML)
	set(f.EnvRSMI, cfEnvRSMI)
	set(f.EnvOpenCL, cfEnvOpenCL)
	set(f.EnvDefault, cfEnvDef)
	set(f.Shared, cfShared)
	set(f.OneSharing, cfOneSharing)
	set(f.EnvOneAPI, cfEnvOneAPI)
	set(f.Explicit, cfExplicit)
	set(f.GlobalIndex, cfGlobalIndex)
	set(f.Autodetected, cfAutodetect)
	set(f.MIG, cfMIG)
	set(f.UUID, cfUUID)
	return b
}

func flagsOf(b uint32) Flags {
	return Flags{
		Multiple: b&cfMult != 0, HasFile: b&cfHasFile != 0, HasType: b&cfHasType != 0,
		CountOnly: b&cfCountOnly != 0, EnvNVML: b&cfEnvNVML != 0, EnvRSMI: b&cfEnvRSMI != 0,
		EnvOpenCL: b&cfEnvOpenCL != 0, EnvDefault: b&cfEnvDef != 0, Shared: b&cfShared != 0,
		OneSharing: b&cfOneSharing != 0, EnvOneAPI: b&cfEnvOneAPI != 0, Explicit: b&cfExplicit != 0,
		GlobalIndex: b&cfGlobalIndex != 0, Autodetected: b&cfAutodetect != 0, MIG: b&cfMIG != 0,
		UUID: b&cfUUID != 0,
	}
}

// Bits returns the record's config_flags as the release of protocol
// version v packs them (gres_node_config_pack): bits the release does not
// have are left out.
func (f Flags) Bits(v uint16) uint32 {
	b := f.bits()
	if v < v2411 {
		b &^= cfExplicit | cfGlobalIndex | cfAutodetect
	}
	if v >= v2605 {
		b &^= cfGlobalIndex
		if b&cfUUID != 0 {
			b |= 1 << 14
		}
	} else {
		b &^= cfMIG | cfUpdate
	}
	return b &^ cfUUID
}

// String is gres_flags2str of release v, as `slurmd -G` prints Flags=
// (22.05 prints none).
func (f Flags) String(v uint16) string {
	b := f.bits()
	var out []string
	add := func(bit uint32, name string) {
		if b&bit != 0 {
			out = append(out, name)
		}
	}
	add(cfCountOnly, "CountOnly")
	add(cfExplicit, "Explicit")
	add(cfHasFile, "HAS_FILE")
	add(cfLoaded, "LOADED")
	add(cfHasType, "HAS_TYPE")
	add(cfEnvNVML, "ENV_NVML")
	if v >= v2605 {
		add(cfUUID, "UUID")
	}
	add(cfEnvRSMI, "ENV_RSMI")
	add(cfEnvOneAPI, "ENV_ONEAPI")
	add(cfEnvOpenCL, "ENV_OPENCL")
	add(cfEnvDef, "ENV_DEFAULT")
	add(cfShared, "SHARED")
	add(cfOneSharing, "ONE_SHARING")
	if v >= v2605 {
		add(cfMIG, "MIG")
	}
	return strings.Join(out, ",")
}

// parseFlags is gres_flags_parse of release v: substring matches, any case.
func parseFlags(s string, v uint16) (flags uint32, noGPUEnv, sharingMentioned bool) {
	has := func(w string) bool { return strings.Contains(strings.ToLower(s), strings.ToLower(w)) }
	if has("CountOnly") {
		flags |= cfCountOnly
	}
	if has("nvidia_gpu_env") {
		flags |= cfEnvNVML
	}
	if has("amd_gpu_env") {
		flags |= cfEnvRSMI
	}
	if has("intel_gpu_env") {
		flags |= cfEnvOneAPI
	}
	if has("opencl_env") {
		flags |= cfEnvOpenCL
	}
	if has("one_sharing") {
		flags |= cfOneSharing
	}
	if v >= v2411 && has("explicit") {
		flags |= cfExplicit
	}
	if v >= v2605 && has("env_uuid") {
		flags |= cfUUID
	}
	noGPUEnv = has("no_gpu_env")
	sharingMentioned = flags&cfOneSharing != 0 || has("all_sharing")
	return flags, noGPUEnv, sharingMentioned
}

// PluginID is gres_build_id: the plugin id slurmctld knows a GRES name by.
func PluginID(name string) uint32 {
	var id uint32
	j := 0
	for i := 0; i < len(name); i++ {
		// C's char is signed on x86: sign-extend like name[i] << j.
		id += uint32(int32(int8(name[i])) << j)
		j = (j + 8) % 32
	}
	return id
}
