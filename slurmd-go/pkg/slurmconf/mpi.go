package slurmconf

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// pmixKeys are mpi/pmix's keys of mpi.conf (pmix_options[] in
// plugins/mpi/pmix/mpi_pmix.c; the same in 22.05, 24.11 and 26.05).
var pmixKeys = table(
	key("PMIxCliTmpDirBase", kString),
	key("PMIxCollFence", kString),
	key("PMIxDebug", kUint32),
	key("PMIxDirectConn", kBool),
	key("PMIxDirectConnEarly", kBool),
	key("PMIxDirectConnUCX", kBool),
	key("PMIxDirectSameArch", kBool),
	key("PMIxEnv", kString),
	key("PMIxFenceBarrier", kBool),
	key("PMIxNetDevicesUCX", kString),
	key("PMIxTimeout", kUint32),
	key("PMIxTlsUCX", kString),
)

// PMIxDefaultTimeout is PMIXP_TIMEOUT_DEFAULT (pmixp_common.h), seconds.
const PMIxDefaultTimeout = 300

// PMIxConf is the mpi/pmix part of mpi.conf as slurm_pmix_conf holds it
// (mpi_p_conf_set), defaults filled in (_init_pmix_conf).
type PMIxConf struct {
	File   string
	Exists bool // the file was there; else every field is its default
	// CliTmpDirBase is PMIxCliTmpDirBase: where the clients' directories
	// go instead of TmpFS ("" unset).
	CliTmpDirBase string
	// CollFence is PMIxCollFence ("mixed", "tree", "ring"; "" unset).
	CollFence string
	// Debug is PMIxDebug: PMIX_DEBUG for the PMIx server library.
	Debug uint32
	// DirectConn defaults to true, as stock.
	DirectConn, DirectConnEarly, DirectConnUCX, DirectSameArch bool
	// Env is PMIxEnv as written: "NAME=value" pairs separated by ';'.
	Env          string
	FenceBarrier bool
	// NetDevicesUCX and TlsUCX become UCX_NET_DEVICES and UCX_TLS.
	NetDevicesUCX, TlsUCX string
	// Timeout is PMIxTimeout, seconds.
	Timeout uint32
	// Set lists the keys the file gave, canonically spelled, sorted.
	Set      []string
	Warnings []Warning
}

// EnvPairs splits PMIxEnv as _parse_pmix_conf_env does: ';'-separated
// tokens, each "NAME=value" (the first '=' splits; a token without one is
// skipped). Stock's filter meant to keep only PMIX* and UCX* names never
// rejects one (its two prefix tests cannot both hold), so every name is kept.
func (c *PMIxConf) EnvPairs() [][2]string {
	var out [][2]string
	for _, tok := range strings.Split(c.Env, ";") {
		name, val, ok := strings.Cut(tok, "=")
		if ok && tok != "" {
			out = append(out, [2]string{name, val})
		}
	}
	return out
}

// MPIConfPath is where slurmd looks for mpi.conf: next to the slurm.conf
// it was given (get_extra_conf_path).
func MPIConfPath(slurmConf string) string {
	return filepath.Join(filepath.Dir(slurmConf), "mpi.conf")
}

// LoadPMIx reads mpi/pmix's keys of the mpi.conf at path. A missing file
// is no error: the defaults (Exists false). Other plugins' keys and lines
// that are no key=value are skipped, as slurmd's s_p_parse_file with
// ignore_new; a bad value is a *ParseError naming the file and line.
func LoadPMIx(path string, opts ...Options) (*PMIxConf, error) {
	rel, data, found, err := readOptional(path, opts)
	if err != nil {
		return nil, err
	}
	if !found {
		return defaultPMIx(path), nil
	}
	return parsePMIx(data, path, rel)
}

// ParsePMIx is LoadPMIx over text read from r; filename names it in errors.
func ParsePMIx(r io.Reader, filename string, opts ...Options) (*PMIxConf, error) {
	rel, data, err := readText(r, filename, opts)
	if err != nil {
		return nil, err
	}
	return parsePMIx(data, filename, rel)
}

func defaultPMIx(file string) *PMIxConf {
	return &PMIxConf{File: file, DirectConn: true, Timeout: PMIxDefaultTimeout}
}

func parsePMIx(data []byte, filename string, rel release) (*PMIxConf, error) {
	p := &parser{
		rel:       rel,
		keys:      pmixKeys,
		conf:      "mpi.conf",
		topFile:   filename,
		top:       map[string]string{},
		topLine:   map[string]pos{},
		lists:     map[string][]string{},
		ignoreNew: true,
	}
	if err := p.parseFile(string(data), filename, 0); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) && pe.Fatal == fatalSlurmConf {
			pe.Fatal = fmt.Sprintf(fatalMPIFmt, filename)
		}
		return nil, err
	}
	c := defaultPMIx(filename)
	c.Exists = true
	b := &builder{p: p, r: rel, file: filename}
	c.CliTmpDirBase = b.str("PMIxCliTmpDirBase", "")
	c.CollFence = b.str("PMIxCollFence", "")
	c.Debug = uint32(b.num("PMIxDebug", 32, 0))
	if b.has("PMIxDirectConn") {
		c.DirectConn = b.boolean("PMIxDirectConn")
	}
	c.DirectConnEarly = b.boolean("PMIxDirectConnEarly")
	c.DirectConnUCX = b.boolean("PMIxDirectConnUCX")
	c.DirectSameArch = b.boolean("PMIxDirectSameArch")
	c.Env = b.str("PMIxEnv", "")
	c.FenceBarrier = b.boolean("PMIxFenceBarrier")
	c.NetDevicesUCX = b.str("PMIxNetDevicesUCX", "")
	c.TlsUCX = b.str("PMIxTlsUCX", "")
	c.Timeout = uint32(b.num("PMIxTimeout", 32, PMIxDefaultTimeout))
	for _, k := range pmixKeys {
		if b.has(k.name) {
			c.Set = append(c.Set, k.name)
		}
	}
	slices.Sort(c.Set)
	c.Warnings = p.warnings
	return c, nil
}
