package gres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
)

// DefaultFileWait is how long stock slurmd waits for a missing File= entry
// of gres.conf before it gives up (_my_stat: 20 tries a second apart).
const DefaultFileWait = 20 * time.Second

// Options are the inputs of Load: what stock slurmd's
// gres_g_node_config_load reads.
type Options struct {
	ConfPath  string   // gres.conf (stock: beside slurm.conf)
	NodeName  string   // this node: selects NodeName= lines
	CPUs      uint32   // MAX(configured CPUs, CPUs found): what Cores= indexes
	Version   uint16   // protocol version of the release imitated
	GresTypes []string // slurm.conf GresTypes
	NodeGres  string   // the node's Gres= in slurm.conf (or -Z --conf): "gpu:a100:2,shard:8"
	// Detector finds the GPUs of AutoDetect=; nil is NullDetector.
	Detector Detector
	// FileWait bounds the wait for a missing File= entry; 0 is
	// DefaultFileWait.
	FileWait time.Duration
	// Exists stats a File= entry (tests); nil is os.Stat.
	Exists func(string) error
	// Stat reads a device's numbers for Node.Devices; nil is StatDevice.
	Stat   StatFunc
	Logger hclog.Logger
}

// Node is what Load found: the records the node registers, in the order
// stock packs them, and the lines stock logs on the way.
type Node struct {
	Records    []Record
	AutoDetect string    // the node's AutoDetect= (AutoDetect* values), "" unset
	Messages   []Message // logged by stock and survived, in order
	version    uint16
}

// context is slurm_gres_context_t: one GresTypes entry.
type gresContext struct {
	name      string
	pluginID  uint32
	countOnly bool
}

// knownPlugins are the gres plugins Debian's Slurm ships: any other name
// loads none and is count-only.
var knownPlugins = map[string]bool{"gpu": true, "mps": true, "shard": true, "nic": true}

// Load reads gres.conf for this node and merges it with slurm.conf's Gres=
// and autodetected GPUs as stock slurmd does before it registers.
// A gres.conf stock would exit on is a *ConfError; the Node returned with
// it holds the messages logged before (for PrintLines), no records.
func Load(ctx context.Context, o Options) (*Node, error) {
	if o.FileWait == 0 {
		o.FileWait = DefaultFileWait
	}
	if o.Detector == nil {
		o.Detector = NullDetector{}
	}
	n := &Node{version: o.Version}
	ctxs, err := gresContexts(o.GresTypes, n)
	if err != nil {
		return n, err
	}
	if len(ctxs) == 0 {
		return n, nil
	}
	// slurmd reads the node's Gres= (gres_init_node_config) before gres.conf.
	slurmGres, err := parseNodeGres(o.NodeGres, ctxs, o.NodeName, n)
	if err != nil {
		return n, err
	}
	var recs []*rec
	if _, err := os.Stat(o.ConfPath); err != nil {
		n.Messages = append(n.Messages, Message{"info", fmt.Sprintf("Can not stat gres.conf file (%s), using slurm.conf data", o.ConfPath)})
	} else {
		p, err := parseConf(ctx, confOptions{path: o.ConfPath, nodeName: o.NodeName, cpuCnt: o.CPUs, version: o.Version,
			gresTypes: names(ctxs), exists: o.Exists, fileWait: o.FileWait})
		n.Messages = append(n.Messages, p.msgs...)
		if err != nil {
			return n, err
		}
		recs = p.recs
		n.AutoDetect = p.autodetect
	}
	for _, c := range ctxs {
		if err := validateConf(recs, c); err != nil {
			return n, err
		}
		if err := validateSlurmConf(slurmGres, c); err != nil {
			return n, err
		}
		checkMismatch(n, slurmGres, recs, c)
	}
	recs = mergeConfig(ctxs, recs, slurmGres, o.CPUs)
	for _, c := range ctxs {
		switch c.name {
		case "gpu":
			sys, err := systemGPUs(ctx, n, o)
			if err != nil {
				return n, err
			}
			if sys != nil {
				recs = mergeSystem(n, recs, sys)
			}
		case "mps", "shard":
			if recs, err = shareDevices(n, recs, "gpu", c.name); err != nil {
				return n, err
			}
		}
	}
	// Remove every GPU with an empty File.
	kept := recs[:0]
	for _, r := range recs {
		if r.name == "gpu" && r.file == "" {
			n.Messages = append(n.Messages, Message{"debug", fmt.Sprintf("Removing file-less GPU %s:%s from final GRES list", r.name, cNull(r.typ))})
			continue
		}
		kept = append(kept, r)
	}
	for _, r := range kept {
		n.Records = append(n.Records, r.record())
	}
	if o.Logger != nil {
		for _, m := range n.Messages {
			o.Logger.Debug("gres.conf", "level", m.Level, "msg", m.Text)
		}
	}
	return n, nil
}

func names(cs []gresContext) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

// gresContexts is gres_init: GresTypes in order, shared names (mps, shard)
// moved after gpu when they came before it.
func gresContexts(types []string, n *Node) ([]gresContext, error) {
	var sorted, shared []string
	haveGPU := false
	for _, t := range types {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if isSharedName(t) && !haveGPU {
			shared = append(shared, t)
			continue
		}
		if t == "gpu" {
			haveGPU = true
		}
		sorted = append(sorted, t)
	}
	if len(shared) > 0 {
		if !haveGPU {
			return nil, &ConfError{Msg: "GresTypes: gres/'shared' requires that gres/gpu also be configured"}
		}
		sorted = append(sorted, shared...)
	}
	var out []gresContext
	for _, name := range sorted {
		dup := false
		for _, c := range out {
			if c.name == name {
				dup = true
			}
		}
		if dup {
			n.Messages = append(n.Messages, Message{"error", "Duplicate plugin gres/" + name + " ignored"})
			continue
		}
		out = append(out, gresContext{name: name, pluginID: PluginID(name), countOnly: !knownPlugins[name]})
	}
	return out, nil
}

// slurmGres is one name of the node's Gres= (gres_node_state_t): its
// count untyped, or its count per type.
type slurmGres struct {
	name     string
	untyped  uint64 // gres_cnt_config
	types    []string
	typeCnt  []uint64
	hasTyped bool
}

// parseNodeGres reads "gpu:a100:2,gpu:1(S:0),shard:8" into one slurmGres
// per GresTypes name (others are logged and dropped, as slurmd filters them).
func parseNodeGres(s string, ctxs []gresContext, nodeName string, node *Node) ([]*slurmGres, error) {
	// gres_init_node_config gives every GresTypes name a state, count 0
	// when Gres= lacks it.
	var out []*slurmGres
	for _, c := range ctxs {
		out = append(out, &slurmGres{name: c.name})
	}
	if s == "" || strings.EqualFold(s, "(null)") {
		return out, nil
	}
	find := func(name string) *slurmGres {
		for _, g := range out {
			if g.name == name {
				return g
			}
		}
		g := &slurmGres{name: name}
		out = append(out, g)
		return g
	}
	for _, tok := range splitGres(s) {
		full := tok
		if i := strings.IndexByte(tok, '('); i >= 0 {
			tok = tok[:i]
		}
		parts := strings.Split(tok, ":")
		name := parts[0]
		known := false
		for _, c := range ctxs {
			if c.name == name {
				known = true
			}
		}
		if !known {
			// gres_name_filter: a name GresTypes lacks is dropped.
			node.Messages = append(node.Messages, Message{"error", fmt.Sprintf("Invalid GRES configured on node %s: %s", nodeName, full)})
			continue
		}
		typ, cnt := "", uint64(1)
		switch len(parts) {
		case 1:
		case 2:
			if c, err := parseCount(parts[1]); err == nil && parts[1] != "" && parts[1][0] >= '0' && parts[1][0] <= '9' {
				cnt = c
			} else {
				typ = parts[1]
			}
		default:
			typ = parts[1]
			c, err := parseCount(parts[2])
			if err != nil {
				return nil, &ConfError{Msg: fmt.Sprintf("Invalid GRES record for %s, invalid count %s", name, parts[2])}
			}
			cnt = c
		}
		g := find(name)
		if typ == "" {
			g.untyped += cnt
			continue
		}
		g.hasTyped = true
		g.untyped += cnt
		found := false
		for i, t := range g.types {
			if t == typ {
				g.typeCnt[i] += cnt
				found = true
			}
		}
		if !found {
			g.types = append(g.types, typ)
			g.typeCnt = append(g.typeCnt, cnt)
		}
	}
	return out, nil
}

// splitGres splits on commas outside parentheses ("gpu:2(S:0,1)").
func splitGres(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// validateConf is _validate_gres_conf for one name.
func validateConf(recs []*rec, c gresContext) error {
	hasFile, hasType, n := -1, -1, 0
	for _, r := range recs {
		if r.name != c.name {
			continue
		}
		n++
		f := b2i(r.flags&cfHasFile != 0)
		if hasFile == -1 {
			hasFile = f
		} else if hasFile != f {
			return &ConfError{File: r.file0, Line: r.line, Msg: fmt.Sprintf("gres.conf for %s, some records have \"File\" specification while others do not", c.name)}
		}
		t := b2i(r.flags&cfHasType != 0)
		if hasType == -1 {
			hasType = t
		} else if hasType != t {
			return &ConfError{File: r.file0, Line: r.line, Msg: fmt.Sprintf("gres.conf for %s, some records have \"Type=\" specification while others do not", c.name)}
		}
		if hasFile == 0 && hasType == 0 && n > 1 {
			return &ConfError{File: r.file0, Line: r.line, Msg: "gres.conf duplicate records for " + c.name}
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// validateSlurmConf is _validate_slurm_conf: typed and untyped counts of
// one name in Gres= may not mix.
func validateSlurmConf(gs []*slurmGres, c gresContext) error {
	for _, g := range gs {
		if g.name != c.name || !g.hasTyped {
			continue
		}
		var typed uint64
		for _, n := range g.typeCnt {
			typed += n
		}
		if g.untyped > typed {
			return &ConfError{Msg: fmt.Sprintf("_foreach_slurm_conf: Some %s GRES in slurm.conf have a type while others do not (gres_ns->gres_cnt_config (%d) > tmp_count (%d))",
				c.name, g.untyped, typed)}
		}
	}
	return nil
}

// checkMismatch is _check_conf_mismatch: gres.conf counts beyond Gres=
// are logged.
func checkMismatch(n *Node, gs []*slurmGres, recs []*rec, c gresContext) {
	if gs == nil {
		return
	}
	type tmp struct {
		typ   string
		count uint64
		name  string
	}
	var list []*tmp
	for _, r := range recs {
		if r.name == c.name {
			list = append(list, &tmp{r.typ, r.count, r.name})
		}
	}
	use := func(count uint64, typ string) {
		for _, t := range list {
			if !strings.EqualFold(t.typ, typ) {
				continue
			}
			if t.count > count {
				t.count -= count
				return
			}
			count -= t.count
			t.count = 0
		}
	}
	for _, g := range gs {
		if g.name != c.name {
			continue
		}
		if !g.hasTyped {
			use(g.untyped, "")
			continue
		}
		for i, t := range g.types {
			use(g.typeCnt[i], t)
		}
	}
	for _, t := range list {
		if t.count == 0 {
			continue
		}
		typ := ""
		if t.typ != "" {
			typ = ":" + t.typ
		}
		text := fmt.Sprintf("A line in gres.conf for GRES %s%s has %d more configured than expected in slurm.conf. Ignoring extra GRES.", t.name, typ, t.count)
		if n.version >= v2411 {
			n.Messages = append(n.Messages, Message{"warning", text})
		} else {
			n.Messages = append(n.Messages, Message{"info", "WARNING: " + text})
		}
	}
}

// mergeConfig is _merge_config: gres.conf can only work within what
// slurm.conf's Gres= outlines; a name Gres= lacks gets a zero-count record.
func mergeConfig(ctxs []gresContext, recs []*rec, gs []*slurmGres, cpuCnt uint32) []*rec {
	var out []*rec
	for _, c := range ctxs {
		found := false
		for _, g := range gs {
			if g.name != c.name {
				continue
			}
			found = true
			if !g.hasTyped {
				recs, out = merge2(recs, out, g.untyped, "", false, c, cpuCnt)
				continue
			}
			for i, t := range g.types {
				recs, out = merge2(recs, out, g.typeCnt[i], t, true, c, cpuCnt)
			}
		}
		if !found {
			out = append(out, &rec{name: c.name, cpuCnt: cpuCnt})
		}
	}
	return out
}

// merge2 is _merge_gres2 for one (name, type) count of Gres=.
func merge2(recs, out []*rec, count uint64, typ string, typed bool, c gresContext, cpuCnt uint32) ([]*rec, []*rec) {
	if count == 0 {
		return recs, out
	}
	for count > 0 {
		i := matchType(recs, c, typ, typed)
		if i < 0 {
			break
		}
		m := recs[i]
		recs = append(recs[:i:i], recs[i+1:]...)
		out = append(out, m)
		if m.count > count {
			m.count = count
			if m.file != "" {
				setFileSubset(m, count)
			}
			count = 0
		} else {
			count -= m.count
		}
	}
	if count == 0 {
		return recs, out
	}
	var flags uint32
	if strings.EqualFold(c.name, "gpu") {
		flags |= cfEnvSet | cfEnvDef
	}
	if c.countOnly {
		flags |= cfCountOnly
	}
	r := &rec{name: c.name, count: count, cpuCnt: cpuCnt, typ: typ, flags: flags}
	if typ != "" {
		r.flags |= cfHasType
	}
	if isSharedName(c.name) {
		r.flags |= cfShared
	}
	return recs, append(out, r)
}

// matchType is _match_type: the first record of c with type typ; untyped
// takes the first record and drops its type.
func matchType(recs []*rec, c gresContext, typ string, typed bool) int {
	for i, r := range recs {
		if r.name != c.name {
			continue
		}
		if !typed {
			r.typ = ""
			r.flags &^= cfHasType
		} else if !strings.EqualFold(r.typ, typ) {
			continue
		}
		return i
	}
	return -1
}

// setFileSubset keeps the first count files of r's File= expression.
func setFileSubset(r *rec, count uint64) {
	paths, err := hostlist.Expand(r.file)
	if err != nil || uint64(len(paths)) <= count {
		return
	}
	r.file = hostlist.Compress(paths[:count])
}

// shareDevices is gres_c_s_init_share_devices: the shared GRES (mps,
// shard) is laid over the sharing one (gpu), one record per device file,
// each shared record right before its GPU.
func shareDevices(n *Node, recs []*rec, sharingName, sharedName string) ([]*rec, error) {
	var sharing, shared []*rec
	kept := recs[:0:0]
	logged := false
	for _, r := range recs {
		if r.name != sharingName {
			kept = append(kept, r)
			continue
		}
		if r.file == "" {
			if !logged {
				n.Messages = append(n.Messages, Message{"error", "SHARING configuration lacks \"File\" specification"})
				logged = true
			}
			kept = append(kept, r)
			continue
		}
		paths, _ := hostlist.Expand(r.file)
		for _, p := range paths {
			s := *r
			s.file, s.count = p, 1
			if r.typ != "" {
				s.flags |= cfHasType
			}
			sharing = append(sharing, &s)
		}
	}
	recs, kept = kept, nil
	noFile, withFile := 0, 0
	for _, r := range recs {
		if r.name != sharedName {
			kept = append(kept, r)
			continue
		}
		if r.file == "" {
			if noFile > 0 {
				return nil, &ConfError{File: r.file0, Line: r.line, Msg: "_build_shared_list: bad configuration, multiple configurations without \"File\""}
			}
			if withFile > 0 {
				return nil, &ConfError{File: r.file0, Line: r.line, Msg: "_build_shared_list: multiple configurations with and without \"File\""}
			}
			noFile++
			s := *r
			s.links = ""
			if r.typ != "" {
				s.flags |= cfHasType
			}
			shared = append(shared, &s)
			continue
		}
		withFile++
		if noFile > 0 {
			return nil, &ConfError{File: r.file0, Line: r.line, Msg: "gres/shared: multiple configurations with and without \"File\""}
		}
		paths, _ := hostlist.Expand(r.file)
		per := r.count / uint64(max(len(paths), 1))
		for _, p := range paths {
			s := *r
			s.file, s.count, s.links = p, per, ""
			if r.typ != "" {
				s.flags |= cfHasType
			}
			shared = append(shared, &s)
		}
	}
	recs = kept
	if len(sharing) == 0 && len(shared) > 0 {
		n.Messages = append(n.Messages, Message{"error", "SHARED specified without any SHARING found"})
		return nil, &ConfError{Msg: "failed to merge SHARED and SHARING configuration",
			Pre: []string{"error: SHARED specified without any SHARING found"}}
	}
	if len(shared) == 1 && shared[0].file == "" {
		in := shared[0]
		count, rem := in.count, uint64(len(sharing))
		for _, g := range sharing {
			s := newSharedRec(g, in.name, in)
			s.count = count / rem
			count -= s.count
			rem--
			recs = append(recs, s, g)
		}
	} else {
		for _, g := range sharing {
			j := -1
			for i, s := range shared {
				if s.file == g.file {
					j = i
					break
				}
			}
			if j >= 0 {
				s := shared[j]
				shared = append(shared[:j:j], shared[j+1:]...)
				if g.typ != "" {
					s.flags |= cfHasType
				}
				if g.cpus != "" {
					s.cpus, s.cpuCnt = g.cpus, g.cpuCnt
				}
				s.typ, s.uniqueID = g.typ, g.uniqueID
				recs = append(recs, s)
			} else {
				s := newSharedRec(g, sharedName, nil)
				s.count = 0
				recs = append(recs, s)
			}
			recs = append(recs, g)
		}
		for _, s := range shared {
			n.Messages = append(n.Messages, Message{"error", fmt.Sprintf("Discarding gres/'shared' configuration (File=%s) without matching gres/'sharing' record", cNull(s.file))})
		}
	}
	// _build_shared_dev_info counts every shared record, of any name.
	var total uint64
	for _, r := range recs {
		if r.flags&cfShared != 0 {
			total += r.count
		}
	}
	if total == 0 {
		kept = recs[:0]
		for _, r := range recs {
			if r.name != sharedName {
				kept = append(kept, r)
			}
		}
		recs = kept
	}
	return recs, nil
}

// newSharedRec is _create_shared_rec.
func newSharedRec(g *rec, name string, in *rec) *rec {
	s := &rec{flags: g.flags, cpuCnt: g.cpuCnt, cpus: g.cpus, file: g.file, name: name, typ: g.typ}
	if in != nil && in.flags&cfShared != 0 {
		s.flags |= in.flags
	} else {
		s.flags |= cfShared
		if strings.EqualFold(name, "mps") {
			s.flags |= cfOneSharing
		}
	}
	return s
}

// systemGPUs asks the detector when AutoDetect names a GPU library.
func systemGPUs(ctx context.Context, n *Node, o Options) ([]*rec, error) {
	if n.AutoDetect == "" || n.AutoDetect == AutoDetectOff {
		return nil, nil
	}
	found, err := o.Detector.Detect(ctx, DetectRequest{AutoDetect: n.AutoDetect, CPUs: o.CPUs})
	if err != nil {
		if errors.Is(err, ErrNoLibrary) {
			n.Messages = append(n.Messages, Message{"info", fmt.Sprintf("gpu: AutoDetect=%s found no library: %v", n.AutoDetect, err)})
			return nil, nil
		}
		return nil, fmt.Errorf("gres: AutoDetect=%s: %w", n.AutoDetect, err)
	}
	if found == nil {
		return nil, nil
	}
	out := make([]*rec, 0, len(found))
	for _, r := range found {
		x := recOf(r)
		x.flags |= cfAutodetect
		// As add_gres_to_list: a detected device file and type set
		// HAS_FILE (MULT for several) and HAS_TYPE, which slurmctld
		// needs to build the node's GRES topology.
		if x.file != "" {
			x.flags |= cfHasFile
			if paths, err := hostlist.Expand(x.file); err == nil && len(paths) > 1 {
				x.flags |= cfMult
			}
		}
		if x.typ != "" {
			x.flags |= cfHasType
		}
		if x.cpuCnt == 0 {
			x.cpuCnt = o.CPUs
		}
		out = append(out, x)
	}
	return out, nil
}

// Lines are `slurmd -G`'s lines for the records (_log_gres_slurmd_conf
// with DebugFlags=Gres; without it stock logs them at verbose, which -G
// does not print, and Lines returns nil), without the log prefix.
func (n *Node) Lines(debugGres bool) []string {
	if !debugGres {
		return nil
	}
	var out []string
	for _, r := range n.Records {
		out = append(out, LogLine(r, n.version))
	}
	return out
}

// LogLine is one record as _log_gres_slurmd_conf of release v logs it.
func LogLine(r Record, v uint16) string {
	index := -1
	if r.File != "" {
		index = trailingIndex(r.File)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Gres Name=%s Type=%s Count=%d", r.Name, cNull(r.Type), r.Count)
	if index != -1 {
		fmt.Fprintf(&b, " Index=%d", index)
	}
	fmt.Fprintf(&b, " ID=%d", PluginID(r.Name))
	if r.File != "" {
		fmt.Fprintf(&b, " File=%s", r.File)
	}
	if r.Cores != "" && index != -1 {
		fmt.Fprintf(&b, " Cores=%s CoreCnt=%d", r.Cores, r.CPUCnt)
	}
	if v < v2411 {
		// 22.05 prints "Links=<x>" or, with none, "(null)".
		if r.Links != "" {
			b.WriteString(" Links=" + r.Links)
		} else {
			b.WriteString(" (null)")
		}
		return b.String()
	}
	fmt.Fprintf(&b, " Links=%s Flags=%s", cNull(r.Links), r.Flags.String(v))
	return b.String()
}

// trailingIndex is _log_gres_slurmd_conf's Index: the digits ending File
// (0 when there are none).
func trailingIndex(f string) int {
	i := len(f)
	for i > 0 && f[i-1] >= '0' && f[i-1] <= '9' {
		i--
	}
	if i == len(f) {
		return 0
	}
	v, _ := strconv.Atoi(f[i:])
	return v
}

// PrintLines is what `slurmd -G` of the node's release prints (log
// prefixes aside): the messages stock logs at info and above, then one
// line per record (LogLine). err, when Load failed, adds the lines stock
// prints for it, its fatal line last.
func PrintLines(n *Node, err error) []string {
	var out []string
	if n != nil {
		for _, m := range n.Messages {
			switch m.Level {
			case "error", "warning":
				out = append(out, m.Level+": "+m.Text)
			case "info":
				out = append(out, m.Text)
			}
		}
	}
	var ce *ConfError
	if errors.As(err, &ce) {
		return append(out, ce.Lines()...)
	}
	if err != nil {
		return append(out, "fatal: "+err.Error())
	}
	for _, r := range n.Records {
		out = append(out, LogLine(r, n.version))
	}
	return out
}
