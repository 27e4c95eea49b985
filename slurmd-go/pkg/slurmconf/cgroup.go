package slurmconf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
)

// NoVal64 is Slurm's NO_VAL64 ("not set").
const NoVal64 = 0xfffffffffffffffe

// cgroupKeys are the keys of cgroup.conf (_read_slurm_cgroup_conf in
// src/common/cgroup.c of 22.05, src/interfaces/cgroup.c of 24.11 and 26.05).
var cgroupKeys = table(
	key("AllowedDevicesFile", kString),
	key("AllowedKmemSpace", kFloat, removed(V2411)),
	key("AllowedRAMSpace", kFloat),
	key("AllowedSwapSpace", kFloat),
	key("CgroupAutomount", kBool, defunct(V2411)),
	key("CgroupJobIdPaths", kBool, added(V2605)),
	key("CgroupMountpoint", kString),
	key("CgroupPlugin", kString),
	key("CgroupReleaseAgentDir", kString, removed(V2605)),
	key("CgroupSlice", kString, added(V2605)),
	key("ConstrainCores", kBool),
	key("ConstrainDevices", kBool),
	key("ConstrainKmemSpace", kBool, removed(V2411)),
	key("ConstrainRAMSpace", kBool),
	key("ConstrainSwapSpace", kBool),
	key("EnableControllers", kBool, added(V2411)),
	key("EnableExtraControllers", kString, added(V2605)),
	key("IgnoreSystemd", kBool),
	key("IgnoreSystemdOnFailure", kBool),
	key("MaxKmemPercent", kFloat, removed(V2411)),
	key("MaxRAMPercent", kFloat),
	key("MaxSwapPercent", kFloat),
	key("MemoryLimitEnforcement", kBool),
	key("MemoryLimitThreshold", kFloat),
	key("MemorySwappiness", kUint64),
	key("MinKmemSpace", kUint64, removed(V2411)),
	key("MinRAMSpace", kUint64),
	key("SignalChildrenProcesses", kBool, added(V2411)),
	key("SystemdTimeout", kUint64, added(V2411)),
)

// CgroupConf is cgroup.conf as the release's slurmd reads it, defaults
// filled in. Memory sizes are MiB, percentages 0-100.
type CgroupConf struct {
	File     string // the file read, or the one looked for
	Exists   bool   // false: no such file, every value is a default
	Version  uint16 // the release read as (Options.Version)
	Warnings []Warning
	// Raw holds every key given (lower-cased, last value wins), defunct
	// keys excepted. Read-only.
	Raw map[string]string

	// Plugin is CgroupPlugin: "autodetect" by default ("" in 22.05, whose
	// plugin loader autodetects then); from 24.11 "disabled" turns
	// cgroups off (see Disabled).
	Plugin     string
	Mountpoint string // CgroupMountpoint, trailing "/" removed

	ConstrainCores     bool
	ConstrainRAMSpace  bool
	ConstrainSwapSpace bool
	ConstrainDevices   bool
	AllowedRAMSpace    float32 // percent of the allocation; default 100
	MaxRAMPercent      float32 // default 100
	MinRAMSpace        uint64  // MiB; default 30
	AllowedSwapSpace   float32 // default 0
	MaxSwapPercent     float32 // default 100
	MemorySwappiness   uint64  // NoVal64 when unset; at most 100

	IgnoreSystemd          bool
	IgnoreSystemdOnFailure bool // implied by IgnoreSystemd

	// 22.05 only.
	Automount          bool
	ConstrainKmemSpace bool
	AllowedKmemSpace   float32 // -1 when unset
	MaxKmemPercent     float32 // default 100
	MinKmemSpace       uint64  // default 30

	// 24.11 and later.
	EnableControllers       bool
	SignalChildrenProcesses bool
	SystemdTimeout          uint64 // milliseconds; default 1000

	// 26.05.
	CgroupSlice            string
	CgroupJobIdPaths       bool
	EnableExtraControllers string
}

// Disabled reports CgroupPlugin=disabled in a release that knows it (24.11
// and later; 22.05 would look for a plugin of that name and fail).
func (c *CgroupConf) Disabled() bool {
	return c.Plugin == "disabled" && release{c.Version}.atLeast(V2411)
}

// CgroupConfPath is where slurmd looks for cgroup.conf: next to the
// slurm.conf it was given (get_extra_conf_path).
func CgroupConfPath(slurmConf string) string {
	return filepath.Join(filepath.Dir(slurmConf), "cgroup.conf")
}

// LoadCgroup reads the cgroup.conf at path as the release of opts (none:
// 22.05). A missing file is no error: slurmd then uses the defaults, and so
// does the returned CgroupConf (Exists false).
func LoadCgroup(path string, opts ...Options) (*CgroupConf, error) {
	rel, data, found, err := readOptional(path, opts)
	if err != nil {
		return nil, err
	}
	if !found {
		return defaultCgroup(path, rel), nil
	}
	return parseCgroup(data, path, rel)
}

// readOptional reads a file beside slurm.conf that slurmd does without:
// the release of opts, then the text, found false if there is no file.
func readOptional(path string, opts []Options) (release, []byte, bool, error) {
	rel, err := newRelease(opts)
	if err != nil {
		return rel, nil, false, err
	}
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rel, nil, false, nil
	}
	if err != nil {
		return rel, nil, false, fmt.Errorf("slurmconf: %w", err)
	}
	return rel, data, true, nil
}

// ParseCgroup parses cgroup.conf text read from r; filename names it in
// errors and anchors relative Include paths.
func ParseCgroup(r io.Reader, filename string, opts ...Options) (*CgroupConf, error) {
	rel, data, err := readText(r, filename, opts)
	if err != nil {
		return nil, err
	}
	return parseCgroup(data, filename, rel)
}

// defaultCgroup is _init_slurm_cgroup_conf (24.11) / _clear_slurm_cgroup_conf
// (22.05).
func defaultCgroup(file string, rel release) *CgroupConf {
	c := &CgroupConf{
		File: file, Version: rel.v, Raw: map[string]string{},
		Mountpoint:       DefaultCgroupMountpoint,
		AllowedRAMSpace:  100,
		MaxRAMPercent:    100,
		MinRAMSpace:      30,
		MaxSwapPercent:   100,
		MemorySwappiness: NoVal64,
	}
	if rel.atLeast(V2411) {
		c.Plugin = DefaultCgroupPlugin
		c.SystemdTimeout = 1000
	} else {
		c.AllowedKmemSpace = -1
		c.MaxKmemPercent = 100
		c.MinKmemSpace = 30
	}
	return c
}

func parseCgroup(data []byte, filename string, rel release) (*CgroupConf, error) {
	p := &parser{
		rel:     rel,
		keys:    cgroupKeys,
		conf:    "cgroup.conf",
		topFile: filename,
		top:     map[string]string{},
		topLine: map[string]pos{},
		lists:   map[string][]string{},
	}
	if err := p.parseFile(string(data), filename, 0); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && pe.Fatal == fatalSlurmConf {
			pe.Fatal = fmt.Sprintf(fatalCgroupFmt, filename)
		}
		return nil, err
	}
	c := defaultCgroup(filename, rel)
	c.Exists = true
	c.Raw = p.top
	b := &builder{p: p, r: rel, file: filename}
	if b.has("CgroupReleaseAgentDir") {
		return nil, b.fatal("cgroupreleaseagentdir", "Support for CgroupReleaseAgentDir option has been removed.")
	}
	if v, ok := p.top["cgroupmountpoint"]; ok {
		c.Mountpoint = strings.TrimSuffix(v, "/")
	}
	c.Automount = b.boolean("CgroupAutomount")
	c.ConstrainCores = b.boolean("ConstrainCores")
	c.ConstrainRAMSpace = b.boolean("ConstrainRAMSpace")
	c.ConstrainSwapSpace = b.boolean("ConstrainSwapSpace")
	c.ConstrainDevices = b.boolean("ConstrainDevices")
	c.ConstrainKmemSpace = b.boolean("ConstrainKmemSpace")
	for _, f := range []struct {
		key string
		dst *float32
	}{
		{"AllowedRAMSpace", &c.AllowedRAMSpace}, {"MaxRAMPercent", &c.MaxRAMPercent},
		{"AllowedSwapSpace", &c.AllowedSwapSpace}, {"MaxSwapPercent", &c.MaxSwapPercent},
		{"AllowedKmemSpace", &c.AllowedKmemSpace}, {"MaxKmemPercent", &c.MaxKmemPercent},
	} {
		if v, ok := p.top[strings.ToLower(f.key)]; ok {
			*f.dst, _ = parseFloat(f.key, v)
		}
	}
	c.MinRAMSpace = b.num("MinRAMSpace", 64, c.MinRAMSpace)
	c.MinKmemSpace = b.num("MinKmemSpace", 64, c.MinKmemSpace)
	if b.has("MemorySwappiness") {
		c.MemorySwappiness = b.num("MemorySwappiness", 64, NoVal64)
		if c.MemorySwappiness > 100 {
			b.warn("memoryswappiness", "Value for MemorySwappiness is too high, rounding down to 100.")
			c.MemorySwappiness = 100
		}
	}
	if b.has("AllowedDevicesFile") {
		at := b.at("alloweddevicesfile")
		if rel.atLeast(V2411) {
			p.warn(at, "warning", "AllowedDevicesFile option is obsolete, please remove it from your configuration.")
		} else {
			p.warn(at, "info", "WARNING: AllowedDevicesFile option is obsolete, please remove it from your configuration.")
		}
	}
	if v, ok := p.top["cgroupplugin"]; ok {
		c.Plugin = v
	}
	// IgnoreSystemd, given at all, implies IgnoreSystemdOnFailure.
	if b.has("IgnoreSystemd") {
		c.IgnoreSystemd = b.boolean("IgnoreSystemd")
		c.IgnoreSystemdOnFailure = true
	}
	if !c.IgnoreSystemd {
		c.IgnoreSystemdOnFailure = b.boolean("IgnoreSystemdOnFailure")
	}
	c.EnableControllers = b.boolean("EnableControllers")
	c.SignalChildrenProcesses = b.boolean("SignalChildrenProcesses")
	c.SystemdTimeout = b.num("SystemdTimeout", 64, c.SystemdTimeout)
	c.CgroupSlice = b.str("CgroupSlice", "")
	c.CgroupJobIdPaths = b.boolean("CgroupJobIdPaths")
	c.EnableExtraControllers = b.str("EnableExtraControllers", "")
	c.Warnings = p.warnings
	return c, nil
}
