package report

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strings"

	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Section is one generated piece of the report; each is also written as an RFC fragment
// rfc/results-<Name>.md.
type Section struct {
	Name  string
	Title string
	Body  func(r *results.Results, plots string) string // plots: path prefix of the PNGs
	// Scenarios are the scenarios whose figures the section shows; none: it speaks of the
	// whole run. A run renders a section's RFC block only if it ran one of them, or, for a
	// whole-run section, if it ran every scenario (no -only): see Renders.
	Scenarios []string
}

// Sections in report order.
var Sections = []Section{
	{"machine", "Machine and configuration", machineSection, nil},
	{"targets", "Issue 6 targets: met or missed", targetsSection, nil},
	{"ping", "REQUEST_PING, closed loop", pingSection, []string{"ping-closed"}},
	{"status", "REQUEST_DAEMON_STATUS, closed loop", statusSection, []string{"status-closed"}},
	{"hold", "Idle connections held", holdSection, []string{"hold"}},
	{"open", "Open loop with idle connections held", openSection, []string{"open-loop"}},
	{"idle", "Idle footprint", idleSection, []string{"idle-start", "idle-after-load"}},
	{"munge", "munged: the first suspect bottleneck", mungeSection, []string{"munge-rate"}},
	{"cpu", "Where the CPU goes", cpuSection, nil},
	{"published", "The published figures", publishedSection, nil},
	{"amdahl", "Amdahl model with I/O wait measured", amdahlSection, nil},
	{"jobs", "Batch jobs: throughput and step-manager memory", jobsSection, []string{"job-throughput", "stepd-rss"}},
	{"srun", "srun steps: launch latency", srunSection, []string{"srun-launch"}},
	{"mpi", "MPI jobs: startup on 4 nodes", mpiSection, []string{"mpi-startup"}},
	{"scenarios", "Scenarios", scenariosSection, nil},
}

// Renders reports whether r renders section s's RFC block: a section of some scenarios when
// r ran one of them (so a run older than a scenario leaves that scenario's block alone), a
// whole-run section when r ran every scenario (so a partial run, benchrun -only, touches only
// its own scenarios' blocks).
func Renders(r *results.Results, s Section) bool {
	if len(s.Scenarios) == 0 {
		return len(r.Config.Only) == 0
	}
	for _, n := range s.Scenarios {
		if r.Ran(n) {
			return true
		}
	}
	return false
}

// provenance is the line every generated fragment starts with: the stack (release, stock
// slurmd, auth type), the run, whether it was taken under load, the machine.
func provenance(r *results.Results, src string) string {
	m := r.Machine
	load := ""
	if l := loadLabel(r); l != "" {
		load = "; " + l
	}
	return fmt.Sprintf("_**%s.** Measured (profile %s, %s%s) on %s, %d cores, %.1f GiB, %s; %s. Generated from `%s` by `bench/cmd/benchreport`: do not edit by hand._",
		stackLabel(r), r.Profile, r.Started, load, m.CPUModel, m.Cores, float64(m.MemoryMiB)/1024, m.Kernel, m.GoVersion, src)
}

// Markdown is results.md: every section, with the plots in dir.
func Markdown(r *results.Results, src string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# TiEE bench results (%s; %s)\n\n%s\n\n", r.Profile, r.StackOf().Label(), provenance(r, src))
	b.WriteString("Every figure below is **measured** unless its row says *modelled*. Ratios are slurmd-go over the reference in the same run.\n\n")
	for _, s := range SectionsFor(r) {
		fmt.Fprintf(&b, "## %s\n\n%s\n", s.Title, s.Body(r, ""))
	}
	if len(r.Notes) > 0 {
		b.WriteString("## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Fragment is section s as an RFC fragment (plots relative to the RFC).
func Fragment(r *results.Results, s Section, src, plots string) string {
	return fmt.Sprintf("%s\n\n%s", provenance(r, src), s.Body(r, plots))
}

// ---- formatting --------------------------------------------------------------------------

func thousands(n int) string { return thousands64(int64(n)) }

func thousands64(n int64) string {
	s := fmt.Sprintf("%d", n)
	if n < 0 {
		return "-" + thousands64(-n)
	}
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func ratio(a, b float64) string {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func pct(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*a/b)
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

func rate(x float64) string {
	if x <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func msf(x float64) string {
	switch {
	case x <= 0:
		return "–"
	case x >= 1000:
		return fmt.Sprintf("%.0f", x)
	case x >= 100:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func errList(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %s", k, thousands64(m[k])))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

func img(plots, name, alt string) string {
	return fmt.Sprintf("![%s](%s%s)\n", alt, plots, name)
}

// ---- sections ----------------------------------------------------------------------------

func machineSection(r *results.Results, _ string) string {
	m := r.Machine
	c := r.Config
	t := table{head: []string{"", ""}}
	t.add("CPU", fmt.Sprintf("%s, %d cores (%s)", m.CPUModel, m.Cores, orDash(m.Virtualized)))
	t.add("Memory", fmt.Sprintf("%.1f GiB", float64(m.MemoryMiB)/1024))
	t.add("Kernel", m.Kernel)
	t.add("Go", m.GoVersion)
	st := r.StackOf()
	where := "the host's Debian packages"
	if r.Stack.Chroot != "" {
		where = fmt.Sprintf("Debian's packages in the chroot %s (daemons and client commands run there, each in a private mount namespace)", r.Stack.Chroot)
	}
	t.add("Slurm (stock slurmd, slurmctld, clients)", fmt.Sprintf("%s, %s; requests at protocol %s", orDash(stockVersion(r)), where, protocolOf(r)))
	if st.UsesMunged() {
		t.add("Authentication", fmt.Sprintf("auth/munge, cred/munge: %s, private munged with %d threads", m.MungeVersion, mungedThreads(r)))
	} else {
		t.add("Authentication", fmt.Sprintf("auth/slurm, cred/slurm: HS256 tokens keyed with a fresh random %d-byte slurm.key beside slurm.conf; no munged; every reply without an auth block", max(r.Stack.KeyBytes, 1)))
	}
	t.add("slurmd-go revision", m.SlurmdGoRev)
	t.add("Date, wall time", fmt.Sprintf("%s, %.0f s", r.Started, r.WallSeconds))
	load := "quiet"
	if l := r.StartLoad(); !l.Quiet {
		load = fmt.Sprintf("**under load**: quiet is a 1-minute average below %.1f", l.QuietBelow)
	}
	if l := loadLabel(r); l != "" && r.StartLoad().Quiet {
		load = "quiet at the start; " + l
	}
	t.add("Load average before", m.LoadAvgBefore+" ("+load+")")
	t.add("RLIMIT_NOFILE (client and daemons)", fmt.Sprintf("%d", m.NofileLimit))
	var sys []string
	for k, v := range m.Sysctl {
		sys = append(sys, k+"="+v)
	}
	sort.Strings(sys)
	t.add("sysctl", strings.Join(sys, ", "))
	t.add("Closed loop", fmt.Sprintf("VUs %v, %.1f s warm-up + %.1f s measured per run; RPC timeout %.0f s", c.VUs, c.WarmupS, c.DurationS, c.RPCTimeoutS))
	t.add("Holds", fmt.Sprintf("%v idle connections, ping probes at %.0f/s for %.1f s", c.Holds, c.HoldProbeRate, c.HoldProbeS))
	t.add("Open loop", fmt.Sprintf("%.0f %% of stock's best closed-loop ping rate, %d held, %.1f s", 100*c.OpenRateFraction, c.OpenHeld, c.OpenDurationS))
	t.add("slurm.conf", fmt.Sprintf("MessageTimeout=%.0f, SlurmdDebug=%s for both daemons; AuthType=auth/%s", c.MessageTimeoutS, c.SlurmdDebug, st.Auth))
	creds := "a fresh munge credential per RPC (made before the timed phase), reply credentials not sent to munged"
	if !st.UsesMunged() {
		creds = "a fresh auth/slurm token per RPC (HS256 with the cluster's key, made by the client as it sends the request: its cost is in the client's CPU), replies carry none"
	}
	t.add("Client", fmt.Sprintf("Go, connection per RPC, loopback source addresses: %d; %s; /proc sampled every %.0f ms", c.SourceAddrs, creds, c.SampleIntervalMS))
	var b strings.Builder
	b.WriteString(t.String())
	b.WriteString("\nTargets, all on this machine in the same run (one slurmctld; the three daemons are nodes of one cluster):\n\n")
	for _, tg := range r.Targets {
		fmt.Fprintf(&b, "- **%s**: %s\n", tg.Name, tg.Desc)
	}
	peers := "The load generator, munged and the daemon under test"
	if !st.UsesMunged() {
		peers = "The load generator (which also makes the tokens) and the daemon under test"
	}
	b.WriteString("\n" + peers + " share the same cores: every throughput here is the throughput of the whole machine doing connection-per-RPC Slurm traffic, not of the daemon alone (see *Where the CPU goes*).\n")
	return b.String()
}

// protocolOf is the run's header version ("0x2600" for runs older than the field).
func protocolOf(r *results.Results) string {
	if r.Stack.Protocol != "" {
		return r.Stack.Protocol
	}
	return fmt.Sprintf("0x%04X", r.StackOf().Protocol())
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func mungedThreads(r *results.Results) int {
	if r.Config.MungedThreads > 0 {
		return r.Config.MungedThreads
	}
	return 2
}

func targetsSection(r *results.Results, _ string) string {
	t := table{head: []string{"Target (issue 6)", "Status", "Measured"}}
	met, missed := 0, 0
	for _, v := range Verdicts(r) {
		st := v.Status
		switch v.Status {
		case Met:
			st = "**met**"
			met++
		case Missed:
			st = "**missed**"
			missed++
		}
		t.add(v.Target, st, v.Measured)
	}
	return fmt.Sprintf("%d met, %d missed; the rest are not measured yet or had no data.\n\n%s", met, missed, t.String())
}

func pingSection(r *results.Results, plots string) string {
	var b strings.Builder
	names := r.TargetNames()
	lim := r.AuthLimit()
	t := table{head: append(append([]string{"VUs"}, names...), "slurmd-go / stock", "slurmd-go / "+lim, "slurmd-go-net / stock")}
	l := table{head: append([]string{"VUs"}, names...)}
	for _, v := range r.Config.VUs {
		row := []string{thousands(v)}
		lrow := []string{thousands(v)}
		for _, n := range names {
			c := r.ClosedFor(n, ping, v)
			if c == nil {
				row, lrow = append(row, "–"), append(lrow, "–")
				continue
			}
			row = append(row, rate(c.Stats.Throughput))
			lrow = append(lrow, msf(c.Stats.Latency.P50Ms)+" / "+msf(c.Stats.Latency.P99Ms))
		}
		row = append(row, ratioOf(r, ping, v, results.TargetGo, results.TargetStock),
			ratioOf(r, ping, v, results.TargetGo, lim),
			ratioOf(r, ping, v, results.TargetGoNet, results.TargetStock))
		t.add(row...)
		l.add(lrow...)
	}
	b.WriteString("Throughput, successful RPC/s (connect, request, reply, close):\n\n")
	b.WriteString(t.String())
	b.WriteString("\nLatency of successful RPCs, p50 / p99 in ms:\n\n")
	b.WriteString(l.String())
	b.WriteString("\n" + errorsTable(r, ping))
	b.WriteString("\n" + img(plots, "throughput_vs_vus.png", "throughput against VUs"))
	b.WriteString(img(plots, "latency_vs_vus.png", "latency against VUs"))
	return b.String()
}

func ratioOf(r *results.Results, msg string, vus int, a, b string) string {
	x, y := r.ClosedFor(a, msg, vus), r.ClosedFor(b, msg, vus)
	if x == nil || y == nil {
		return "–"
	}
	return ratio(x.Stats.Throughput, y.Stats.Throughput)
}

func errorsTable(r *results.Results, msg string) string {
	t := table{head: []string{"VUs", "target", "failed RPCs", "by kind", "kernel listen overflows"}}
	for _, c := range r.Closed {
		if c.Msg != msg || (c.Stats.ErrorTotal == 0 && c.Kernel.ListenOverflows == 0) {
			continue
		}
		t.add(thousands(c.VUs), c.Target, thousands64(c.Stats.ErrorTotal), errList(c.Stats.Errors), thousands64(c.Kernel.ListenOverflows))
	}
	if len(t.rows) == 0 {
		return "No failed RPC and no listen-queue overflow in any run.\n"
	}
	return "Failures (protocol errors are bad_reply, bad_reply_type and bad_reply_rc; the others are transport failures) and the kernel's listen-queue overflows during the run:\n\n" + t.String()
}

func statusSection(r *results.Results, _ string) string {
	t := table{head: []string{"VUs", "target", "RPC/s", "p50 ms", "p99 ms", "failed", "vs stock"}}
	for _, v := range r.Config.StatusVUs {
		for _, n := range r.TargetNames() {
			c := r.ClosedFor(n, status, v)
			if c == nil {
				continue
			}
			t.add(thousands(v), n, rate(c.Stats.Throughput), msf(c.Stats.Latency.P50Ms), msf(c.Stats.Latency.P99Ms),
				thousands64(c.Stats.ErrorTotal)+" "+errList(c.Stats.Errors), ratioOf(r, status, v, n, results.TargetStock))
		}
	}
	return "REQUEST_DAEMON_STATUS has no request body and a reply body (RESPONSE_SLURMD_STATUS, ~120 bytes plus strings); the limit servers do not implement it.\n\n" + t.String()
}

func holdSection(r *results.Results, plots string) string {
	t := table{head: []string{"wanted", "target", "held", "ramp s", "RSS before MiB", "RSS during MiB", "KiB / held conn", "KiB / accepted fd",
		"threads peak", "fds peak", "probe p50 ms", "probe p99 ms", "probe max ms", "probes failed"}}
	for _, n := range r.Config.Holds {
		for _, name := range r.TargetNames() {
			h := r.HoldFor(name, n)
			if h == nil {
				continue
			}
			ramp := fmt.Sprintf("%.2f", h.Hold.RampSeconds)
			if !h.Hold.RampComplete {
				ramp = "never all"
			}
			t.add(thousands(n), name, thousands64(h.Hold.Established), ramp,
				fmt.Sprintf("%.1f", mib(h.Baseline.RSSMedianKB)), fmt.Sprintf("%.1f", mib(h.During.RSSMedianKB)),
				fmt.Sprintf("%.2f", h.PerConnKB), fmt.Sprintf("%.2f", h.PerFDKB),
				thousands(h.During.ThreadsPeak), thousands(h.During.FDsPeak),
				msf(h.Probe.LatencyAll.P50Ms), msf(h.Probe.LatencyAll.P99Ms), msf(h.Probe.LatencyAll.MaxMs),
				fmt.Sprintf("%d of %d %s", h.Probe.ErrorTotal, h.Probe.LatencyAll.Count, errList(h.Probe.Errors)))
		}
	}
	var b strings.Builder
	b.WriteString("Idle connections are connected and send nothing; a connection the daemon closes (both daemons do at MessageTimeout) is reopened. " +
		"*KiB / held conn* = (median RSS during the probes − median RSS before) / connections the client held; *KiB / accepted fd* divides by the daemon's extra descriptors instead. " +
		"Probe latencies count failed probes at the time they took to fail.\n\n")
	b.WriteString(t.String())
	for _, n := range r.Config.Holds {
		g, s := r.HoldFor(results.TargetGo, n), r.HoldFor(results.TargetStock, n)
		if g != nil && s != nil && s.PerConnKB > 0 {
			fmt.Fprintf(&b, "\n%s held: slurmd-go uses %s the memory per held connection of stock (%.2f vs %.2f KiB); probe p99 %s vs %s ms.\n",
				thousands(n), ratio(g.PerConnKB, s.PerConnKB), g.PerConnKB, s.PerConnKB, msf(g.Probe.LatencyAll.P99Ms), msf(s.Probe.LatencyAll.P99Ms))
		}
	}
	b.WriteString("\n" + img(plots, "memory_vs_conns.png", "daemon memory against open connections"))
	return b.String()
}

func openSection(r *results.Results, _ string) string {
	t := table{head: []string{"target", "rate /s", "held", "ok", "p50 ms", "p99 ms", "p99 ms incl. failures", "max ms", "failed", "threads peak", "fds peak"}}
	for _, n := range r.TargetNames() {
		o := r.OpenFor(n)
		if o == nil {
			continue
		}
		t.add(n, rate(o.Rate), thousands64(o.Hold.Established), thousands64(o.Stats.OK), msf(o.Stats.Latency.P50Ms), msf(o.Stats.Latency.P99Ms),
			msf(o.Stats.LatencyAll.P99Ms), msf(o.Stats.LatencyAll.MaxMs), thousands64(o.Stats.ErrorTotal)+" "+errList(o.Stats.Errors),
			thousands(o.Daemon.ThreadsPeak), thousands(o.Daemon.FDsPeak))
	}
	var b strings.Builder
	b.WriteString("Requests start on schedule whatever the daemon does; latency runs from the moment a request was due, so a stalled daemon cannot hide it (no coordinated omission). A request that fails (e.g. times out after 10 s) counts in *p99 incl. failures* at the time it took.\n\n")
	b.WriteString(t.String())
	g, s := r.OpenFor(results.TargetGo), r.OpenFor(results.TargetStock)
	if g != nil && s != nil {
		fmt.Fprintf(&b, "\nslurmd-go p99 (incl. failures) is %s stock's.\n", ratio(g.Stats.LatencyAll.P99Ms, s.Stats.LatencyAll.P99Ms))
	}
	return b.String()
}

func idleSection(r *results.Results, _ string) string {
	t := table{head: []string{"target", "after registration: RSS MiB", "threads", "fds", "after the load: RSS MiB", "threads", "fds"}}
	for _, n := range r.TargetNames() {
		row := []string{n}
		for _, w := range []string{"start", "after-load"} {
			i := r.IdleFor(n, w)
			if i == nil {
				row = append(row, "–", "–", "–")
				continue
			}
			row = append(row, fmt.Sprintf("%.1f", mib(i.Series.RSSMedianKB)), thousands(i.Series.ThreadsLast), thousands(i.Series.FDsLast))
		}
		t.add(row...)
	}
	out := "Median over the sample window, no load. The Go daemons' RSS after the load includes heap the Go runtime keeps for reuse.\n\n" + t.String()
	m := table{head: memHead("target")}
	for _, n := range r.TargetNames() {
		if i := r.IdleFor(n, "start"); i != nil && i.Mem != nil {
			m.add(append([]string{n}, memRow(i.Mem)...)...)
		}
	}
	if len(m.rows) > 0 {
		out += "\nWhat the RSS after registration is made of (`/proc/<pid>/smaps` at the end of the window): " + memNote + "\n\n" + m.String()
	}
	return out
}

// memNote explains the breakdown columns of memHead.
const memNote = "*anonymous* is heap, stacks and runtime metadata, the process's own; *file-backed* is pages of the executable and its libraries mapped from the page cache, shared with every process that maps the same file and reclaimable by the kernel; *PSS* divides shared pages among their sharers; *private* is what no other process maps."

func memHead(first string) []string {
	return []string{first, "RSS MiB", "anonymous MiB", "file-backed MiB", "largest files: resident / mapped MiB", "PSS MiB", "private MiB"}
}

func memRow(m *procstat.Mem) []string {
	var files []string
	for _, f := range m.Files {
		if len(files) == 3 {
			break
		}
		files = append(files, fmt.Sprintf("`%s` %.1f / %.1f", path.Base(f.Path), mib(f.RSSKB), mib(f.SizeKB)))
	}
	return []string{fmt.Sprintf("%.1f", mib(m.RSSKB)), fmt.Sprintf("%.1f", mib(m.AnonKB)), fmt.Sprintf("%.1f", mib(m.FileKB)),
		strings.Join(files, ", "), fmt.Sprintf("%.1f", mib(m.PSSKB)), fmt.Sprintf("%.1f", mib(m.PrivateKB))}
}

func mungeSection(r *results.Results, plots string) string {
	m := r.Munge
	if m == nil {
		return "Not measured in this run.\n"
	}
	t := table{head: []string{"concurrent callers", "encode /s", "encode mean ms", "decode /s", "decode mean ms",
		"munged µs CPU / encode", "/ decode", "caller µs CPU / encode", "/ decode"}}
	for i := range m.Encode {
		e := m.Encode[i]
		d := results.RatePoint{}
		if i < len(m.Decode) {
			d = m.Decode[i]
		}
		t.add(thousands(e.Concurrency), rate(e.Rate), fmt.Sprintf("%.3f", e.MeanMs), rate(d.Rate), fmt.Sprintf("%.3f", d.MeanMs),
			fmt.Sprintf("%.0f", e.MungedCPUUS), fmt.Sprintf("%.0f", d.MungedCPUUS), fmt.Sprintf("%.0f", e.CallerCPUUS), fmt.Sprintf("%.0f", d.CallerCPUUS))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "munge calls (TiEE's Go client of munged's socket protocol, as the daemon uses) from the bench process against the bench's private munged (%d threads), each credential decoded once:\n\n", m.Threads)
	b.WriteString(t.String())
	ce := r.Munge.CredCeiling()
	fmt.Fprintf(&b, "\n*Modelled* from these measured rates: a daemon that decodes one credential and encodes one per RPC cannot exceed 1 / (1/decode + 1/encode) = **%.0f RPC/s** on this machine while nothing else competes for the cores.", ce)
	if lm := r.BestClosed(results.TargetLimitMunge, ping); lm != nil {
		fmt.Fprintf(&b, " The munge-bound limit server, which does exactly that with the load generator running beside it, reached **%.0f RPC/s** (%s VUs, measured).", lm.Stats.Throughput, thousands(lm.VUs))
	}
	if ln := r.BestClosed(results.TargetLimitNone, ping); ln != nil {
		fmt.Fprintf(&b, " Without munge, the same client and connection-per-RPC server reach **%.0f RPC/s** (%s VUs, measured).", ln.Stats.Throughput, thousands(ln.VUs))
	}
	b.WriteString("\n\n")
	if r.Creds.Made > 0 {
		fmt.Fprintf(&b, "The client made %s credentials (munge encodes, 16 at a time) in %.1f s, %.0f/s, all before the timed phases they were used in; %s were left unused.\n\n",
			thousands64(r.Creds.Made), r.Creds.Seconds, r.Creds.Rate, thousands(r.Creds.Left))
	}
	b.WriteString(img(plots, "munge_rate.png", "munged encode and decode rate against concurrency"))
	return b.String()
}

func tokensSection(r *results.Results, plots string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "munge-rate and the munge-bound limit server are not applicable here: %s has no munged. ", r.StackOf().Label())
	tr := r.Tokens
	if tr == nil {
		b.WriteString("The token rates were not measured in this run.\n")
		return b.String()
	}
	t := table{head: []string{"concurrent callers", "make /s", "make mean µs", "make µs CPU", "verify /s", "verify mean µs", "verify µs CPU"}}
	for i := range tr.Encode {
		e := tr.Encode[i]
		d := results.RatePoint{}
		if i < len(tr.Decode) {
			d = tr.Decode[i]
		}
		t.add(thousands(e.Concurrency), rate(e.Rate), fmt.Sprintf("%.1f", 1000*e.MeanMs), fmt.Sprintf("%.1f", e.CallerCPUUS),
			rate(d.Rate), fmt.Sprintf("%.1f", 1000*d.MeanMs), fmt.Sprintf("%.1f", d.CallerCPUUS))
	}
	fmt.Fprintf(&b, "Instead, what auth/slurm costs: REQUEST_PING tokens (%d bytes) made and verified by slurmd-go's authslurm package (HS256 keyed with the cluster's slurm.key: signature, expiry, ruid, context), in the bench process, %s of each per concurrency level (CPU per call from /proc, 10 ms ticks):\n\n",
		tr.TokenBytes, thousands(opsOf(tr.Decode)))
	b.WriteString(t.String())
	fmt.Fprintf(&b, "\n*Modelled* from these measured rates: a daemon that verifies one token per RPC (a 24.11 reply carries no credential) is held to **%.0f RPC/s** by that work alone, on both cores, with nothing else running.", tr.CredCeiling())
	if lm := r.BestClosed(results.TargetLimitSlurm, ping); lm != nil {
		fmt.Fprintf(&b, " The auth/slurm-bound limit server, which verifies the token and the body hash and answers, with the load generator beside it, reached **%.0f RPC/s** (%s VUs, measured)", lm.Stats.Throughput, thousands(lm.VUs))
		if lm.Limit != nil && lm.Limit.HandleNS > 0 && lm.Limit.Requests > 0 {
			fmt.Fprintf(&b, "; verifying took %.0f %% of its request handling (%.1f µs per request)",
				100*float64(lm.Limit.DecodeNS)/float64(lm.Limit.HandleNS), float64(lm.Limit.DecodeNS)/float64(lm.Limit.Requests)/1e3)
		}
		b.WriteString(".")
	}
	if ln := r.BestClosed(results.TargetLimitNone, ping); ln != nil {
		fmt.Fprintf(&b, " With no authentication at all, the same client and connection-per-RPC server reach **%.0f RPC/s** (%s VUs, measured).", ln.Stats.Throughput, thousands(ln.VUs))
	}
	b.WriteString("\n\n")
	if r.Creds.Minted > 0 {
		fmt.Fprintf(&b, "The client minted %s tokens, one per request, as it sent them (tokens cost microseconds and auth/slurm keeps no replay cache, so none is made in advance; a token lives 60 s).\n\n",
			thousands64(r.Creds.Minted))
	}
	b.WriteString(img(plots, "token_rate.png", "auth/slurm token make and verify rate against concurrency"))
	return b.String()
}

// opsOf is the operations per level of points (the first level's).
func opsOf(points []results.RatePoint) int {
	if len(points) == 0 {
		return 0
	}
	return points[0].Ops
}

func cpuSection(r *results.Results, _ string) string {
	var b strings.Builder
	names := r.TargetNames()
	pt := table{head: append([]string{"VUs"}, names...)}
	for _, v := range r.Config.VUs {
		row := []string{thousands(v)}
		for _, n := range names {
			c := r.ClosedFor(n, ping, v)
			if c == nil || c.Stats.OK == 0 || c.CPU.Total <= 0 {
				row = append(row, "–")
				continue
			}
			row = append(row, fmt.Sprintf("%.0f", c.CPU.Daemon/float64(c.Stats.OK)*1e6))
		}
		pt.add(row...)
	}
	b.WriteString("Daemon CPU per successful REQUEST_PING, µs (from /proc during the measured window; for the limit servers, their own CPU):\n\n")
	b.WriteString(pt.String())
	top := maxInt(r.Config.VUs)
	munged := r.StackOf().UsesMunged()
	head := []string{"target", "RPC/s", "daemon µs / RPC", "munged µs / RPC", "client µs / RPC",
		"daemon %", "munged %", "client %", "kernel irq+softirq %", "other processes %", "idle %"}
	if !munged { // auth/slurm: nothing runs beside the daemon to authenticate
		head = []string{"target", "RPC/s", "daemon µs / RPC", "client µs / RPC",
			"daemon %", "client %", "kernel irq+softirq %", "other processes %", "idle %"}
	}
	t := table{head: head}
	for _, n := range names {
		c := r.ClosedFor(n, ping, top)
		if c == nil || c.Stats.OK == 0 || c.CPU.Total <= 0 {
			continue
		}
		per := func(s float64) string { return fmt.Sprintf("%.0f", s/float64(c.Stats.OK)*1e6) }
		share := func(s float64) string { return fmt.Sprintf("%.0f", 100*s/c.CPU.Total) }
		if !munged {
			t.add(n, rate(c.Stats.Throughput), per(c.CPU.Daemon), per(c.CPU.Client),
				share(c.CPU.Daemon), share(c.CPU.Client), share(c.CPU.IRQ), share(c.CPU.Others()), share(c.CPU.Total-c.CPU.Busy))
			continue
		}
		t.add(n, rate(c.Stats.Throughput), per(c.CPU.Daemon), per(c.CPU.Munged), per(c.CPU.Client),
			share(c.CPU.Daemon), share(c.CPU.Munged), share(c.CPU.Client), share(c.CPU.IRQ), share(c.CPU.Others()), share(c.CPU.Total-c.CPU.Busy))
	}
	fmt.Fprintf(&b, "\nThe %s-VU runs, as shares of all %d cores (*other processes* is slurmctld and anything else running on the machine meanwhile; a large figure there means the run shared the machine with other work):\n\n%s",
		thousands(top), r.Machine.Cores, t.String())
	return b.String()
}

func jobsSection(r *results.Results, _ string) string {
	if len(r.Jobs) == 0 && len(r.StepMg) == 0 {
		return "Not measured in this run.\n"
	}
	var b strings.Builder
	sj := r.JobsFor(results.TargetStock)
	t := table{head: []string{"target", "partition", "tasks", "seconds", "jobs/s", "vs stock", "final states"}}
	for _, j := range r.Jobs {
		vs := "–"
		if sj != nil {
			vs = ratio(j.Rate, sj.Rate)
		}
		t.add(j.Target, j.Partition, thousands(j.Tasks), fmt.Sprintf("%.2f", j.Seconds), fmt.Sprintf("%.1f", j.Rate), vs, stateList(j.States))
	}
	fmt.Fprintf(&b, "Job throughput: one array of `true` per daemon (`sbatch -a 1-N -p <its partition> --wrap true`, as root), daemons one after another, timed from sbatch until no task is left pending, running or completing in squeue (polled every 250 ms); final states from `scontrol show job`. slurmctld (batch_sched_delay=0, DefMemPerCPU=64) starts queued tasks about once a second per free slot; the per-daemon partitions let %d jobs share a core (OverSubscribe=FORCE:%d, the same for every daemon) so that the rate shows the node daemons' launch and completion path rather than that pacing.\n\n", max(1, r.Config.JobsPerCore), max(1, r.Config.JobsPerCore))
	b.WriteString(t.String())
	ss := r.StepRSSFor(results.TargetStock)
	t = table{head: []string{"target", "step manager", "VmRSS MiB (median)", "vs stock", "threads", "samples"}}
	for _, s := range r.StepMg {
		vs := "–"
		if ss != nil {
			vs = ratio(float64(s.RSSMedianKB), float64(ss.RSSMedianKB))
		}
		t.add(s.Target, "`"+s.Cmdline+"`", fmt.Sprintf("%.1f", mib(s.RSSMedianKB)), vs, thousands(s.Threads), thousands(len(s.SamplesKB)))
	}
	b.WriteString("\nStep-manager memory: one batch job of `sleep` per daemon; VmRSS of its step manager process (found by walking up from the job's process), sampled while idle.\n\n")
	b.WriteString(t.String())
	m := table{head: memHead("target")}
	for _, s := range r.StepMg {
		if s.Mem != nil {
			m.add(append([]string{s.Target}, memRow(s.Mem)...)...)
		}
	}
	if len(m.rows) > 0 {
		b.WriteString("\nWhat a step manager's RSS is made of (`/proc/<pid>/smaps` after the samples): " + memNote + "\n\n" + m.String())
	}
	return b.String()
}

func srunSection(r *results.Results, _ string) string {
	if len(r.Srun) == 0 {
		return "Not measured in this run.\n"
	}
	ss := r.SrunFor(results.TargetStock)
	t := table{head: []string{"target", "node", "runs ok", "failed", "p50 ms", "p99 ms", "min ms", "max ms", "mean ms", "warm-up ms",
		"p50 vs stock", "p99 vs stock"}}
	var fails []string
	for _, s := range r.Srun {
		var sp50, sp99 float64 // ratio prints – against a zero
		if ss != nil {
			sp50, sp99 = ss.P50Ms, ss.P99Ms
		}
		t.add(s.Target, s.Node, fmt.Sprintf("%d of %d", s.OK, s.Runs), thousands(s.Errors), msf(s.P50Ms), msf(s.P99Ms),
			msf(s.MinMs), msf(s.MaxMs), msf(s.MeanMs), msf(s.WarmupMs), ratio(s.P50Ms, sp50), ratio(s.P99Ms, sp99))
		for _, e := range s.ErrorText {
			fails = append(fails, fmt.Sprintf("- %s: %s\n", s.Target, e))
		}
	}
	var b strings.Builder
	timeout := r.Srun[0].TimeoutS
	fmt.Fprintf(&b, "Step launch: per daemon, `srun -p <its partition> -w <its node> -N1 -n1 true` as root, one after another after one untimed warm-up run; each latency is the wall time of the srun command (allocation by slurmctld, REQUEST_LAUNCH_TASKS to the daemon, the step manager and the task, the step's and the job's completion), each run bounded by %.0f s. Percentiles are nearest-rank over the successful runs (below 100 runs p99 is the slowest); every latency is in results.json.\n\n", timeout)
	b.WriteString(t.String())
	if g := r.SrunFor(results.TargetGo); g != nil && ss != nil && g.OK > 0 && ss.OK > 0 {
		fmt.Fprintf(&b, "\nslurmd-go's median srun takes %s stock's (%.1f vs %.1f ms), its p99 %s (%.1f vs %.1f ms).\n",
			ratio(g.P50Ms, ss.P50Ms), g.P50Ms, ss.P50Ms, ratio(g.P99Ms, ss.P99Ms), g.P99Ms, ss.P99Ms)
	}
	if len(fails) > 0 {
		b.WriteString("\nFailed runs (first few per daemon):\n\n" + strings.Join(fails, ""))
	}
	return b.String()
}

func mpiSection(r *results.Results, _ string) string {
	if len(r.MPI) == 0 {
		return "Not measured in this run.\n"
	}
	sm := r.MPIFor(results.TargetStock)
	t := table{head: []string{"target", "nodes", "ranks", "runs ok", "failed", "startup p50 ms", "min ms", "max ms",
		"srun wall p50 ms", "min ms", "max ms", "barrier p50 ms", "warm-up ms", "startup p50 vs stock", "wall p50 vs stock"}}
	var fails []string
	for _, m := range r.MPI {
		var s50, w50 float64 // ratio prints – against a zero, and for a daemon without figures
		if sm != nil && m.OK > 0 {
			s50, w50 = sm.Startup.P50, sm.Wall.P50
		}
		t.add(m.Target, strings.Join(m.Nodes, ","), thousands(m.Ranks), fmt.Sprintf("%d of %d", m.OK, m.Runs), thousands(m.Errors),
			msf(m.Startup.P50), msf(m.Startup.Min), msf(m.Startup.Max), msf(m.Wall.P50), msf(m.Wall.Min), msf(m.Wall.Max),
			msf(results.Summarize(m.BarrierMs).P50), msf(m.WarmupMs), ratio(m.Startup.P50, s50), ratio(m.Wall.P50, w50))
		for _, e := range m.ErrorText {
			fails = append(fails, fmt.Sprintf("- %s: %s\n", m.Target, oneLine(e, 300)))
		}
	}
	var b strings.Builder
	m0 := r.MPI[0]
	runs, warm := fmt.Sprintf("%d runs one after another", m0.Runs), "with no warm-up run"
	if m0.Runs == 1 {
		runs = "1 run"
	}
	if m0.Warmup {
		warm = "after one untimed warm-up run"
	}
	fmt.Fprintf(&b, "MPI startup: per daemon with a %d-node partition of its own kind, `srun -p <its partition> -N%d -n%d -O --mpi=pmi2 -K1 hello` as root, %s %s; `hello` is `slurmd-go/integration/testdata/mpi/hello.c` (the integration suite's MPI program) built with the stack's `mpicc.mpich` (Debian's MPICH), so every rank is an MPICH process on this machine, oversubscribed (%d ranks on %d cores). "+
		"**Startup** is the time from srun's start until srun relays rank 0's line written after MPI_Init, an allreduce and a barrier of every rank: the moment every rank has passed MPI_Init (allocation, the launch on every node, the PMI-2 exchange across the nodes, MPICH's own setup). **srun wall** is srun's start to its exit (MPI_Finalize and the step's and job's end included). "+
		"A run counts only if srun exits 0 within %.0f s and its output is one job of %d ranks on all the nodes (ranks that come up as singletons fail it). Medians are nearest-rank over the runs that counted; every time is in results.json.\n\n",
		len(m0.Nodes), len(m0.Nodes), m0.Ranks, runs, warm, m0.Ranks, r.Machine.Cores, m0.TimeoutS, m0.Ranks)
	b.WriteString(t.String())
	if g := r.MPIFor(results.TargetGo); g != nil && sm != nil && g.OK > 0 && sm.OK > 0 {
		fmt.Fprintf(&b, "\nslurmd-go's median MPI startup takes %s stock's (%s vs %s ms), its median srun %s (%s vs %s ms).\n",
			ratio(g.Startup.P50, sm.Startup.P50), msf(g.Startup.P50), msf(sm.Startup.P50), ratio(g.Wall.P50, sm.Wall.P50), msf(g.Wall.P50), msf(sm.Wall.P50))
	}
	if len(fails) > 0 {
		b.WriteString("\nFailed runs (first few per daemon; more of each one's output is in results.json):\n\n" + strings.Join(fails, ""))
	}
	return b.String()
}

// oneLine is s on one line (newlines as " ⏎ "), cut to n bytes.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ⏎ ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func stateList(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func scenariosSection(r *results.Results, _ string) string {
	t := table{head: []string{"scenario", "status", "note", "seconds"}}
	for _, s := range r.Status {
		t.add(s.Title, s.Status, s.Note, fmt.Sprintf("%.0f", s.Seconds))
	}
	return t.String()
}

func publishedSection(r *results.Results, _ string) string {
	t := table{head: []string{"Published", "Kind", "Ours"}}
	var best *results.ClosedRun
	for _, n := range []string{results.TargetStock, results.TargetGo, results.TargetGoNet} {
		if c := r.BestClosed(n, ping); c != nil && (best == nil || c.Stats.Throughput > best.Stats.Throughput) {
			best = c
		}
	}
	row := "–"
	if best != nil {
		row = fmt.Sprintf("*measured*: the best node daemon reached %.0f RPC/s (%s, %s VUs)", best.Stats.Throughput, best.Target, thousands(best.VUs))
		if ln := r.BestClosed(results.TargetLimitNone, ping); ln != nil {
			row += fmt.Sprintf("; the machine's connection-per-RPC ceiling without %s was %.0f RPC/s", authName(r), ln.Stats.Throughput)
		}
		if r.Munge != nil {
			lo, hi := 0.0, 0.0
			for _, p := range append(append([]results.RatePoint{}, r.Munge.Encode...), r.Munge.Decode...) {
				if p.MungedCPUUS <= 0 {
					continue
				}
				if lo == 0 || p.MungedCPUUS < lo {
					lo = p.MungedCPUUS
				}
				hi = max(hi, p.MungedCPUUS)
			}
			if lo > 0 {
				row += fmt.Sprintf(". *Modelled* from munged's measured %.0f–%.0f µs of CPU per call: 200,000 RPC/s means 400,000 munge calls/s, %.0f–%.0f cores for munged alone",
					lo, hi, 400000*lo/1e6, 400000*hi/1e6)
			}
		}
		if r.Tokens != nil {
			lo := 0.0
			for _, p := range r.Tokens.Decode {
				if p.CallerCPUUS > 0 && (lo == 0 || p.CallerCPUUS < lo) {
					lo = p.CallerCPUUS
				}
			}
			if lo > 0 {
				row += fmt.Sprintf(". *Modelled* from the measured %.1f µs of CPU per token verify: 200,000 RPC/s means %.1f cores for the daemon's token checks alone (24.11 signs no reply)",
					lo, 200000*lo/1e6)
			}
		}
	}
	t.add("10,000 → 200,000 req/s", "published (not ours): a modelled target", row)
	top := maxInt(r.Config.Holds)
	row = "–"
	if g := r.HoldFor(results.TargetGo, top); g != nil {
		row = fmt.Sprintf("*measured*: slurmd-go %.2f KiB per held connection (%s held)", g.PerConnKB, thousands64(g.Hold.Established))
		var lo, hi float64
		for _, h := range r.Holds {
			if h.Target == results.TargetStock && h.PerFDKB > 0 {
				if lo == 0 || h.PerFDKB < lo {
					lo = h.PerFDKB
				}
				hi = max(hi, h.PerFDKB)
			}
		}
		if hi > 0 {
			limit := "it accepts at most 256"
			if r.StackOf().Release != launch.Release2205 {
				limit = "it serves at most 256 at a time (its conmgr accepts the rest and retries them with back-off)"
			}
			row += fmt.Sprintf("; the stock slurmd %.1f–%.1f KiB of RSS per accepted connection (its threads' stacks are reserved address space; only the pages they touch are resident), and %s", lo, hi, limit)
		}
	}
	t.add("2 MB → < 3 KB memory per connection", "published (not ours)", row)
	t.add("GPU utilisation ~70 % → 99.4 %", "published (not ours): a target", "not measured: no GPU on this machine")
	return t.String()
}
