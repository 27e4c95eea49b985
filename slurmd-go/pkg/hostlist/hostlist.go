package hostlist

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Limits. MaxRange and MaxPrefixCount are Slurm's MAX_RANGE and
// MAX_PREFIX_CNT; MaxHosts is ours and bounds the memory one expression can
// make us use (Slurm has no overall cap).
const (
	MaxRange       = 64 * 1024  // hosts in one lo-hi interval
	MaxPrefixCount = 64 * 1024  // hosts in one bracket group of a prefix
	MaxRanges      = 256 * 1024 // comma items inside one bracket group
	MaxHosts       = 256 * 1024 // hosts in one parsed expression
)

var (
	// ErrSyntax is wrapped by every parse error.
	ErrSyntax = errors.New("hostlist: invalid hostlist expression")
	// ErrTooLarge is wrapped when an expression exceeds a limit above.
	ErrTooLarge = errors.New("hostlist: expression too large")
)

// separators of hostlist_create ("\t, ").
func isSep(c byte) bool { return c == ',' || c == ' ' || c == '\t' }

// hostRange mirrors hostrange_t. Widths may be rewritten by widthCombine,
// exactly like the C code, which is why ranges are kept by pointer.
type hostRange struct {
	prefix string
	lo, hi uint64
	width  int
	single bool // no numeric suffix: prefix is the whole name
}

func (r *hostRange) count() uint64 {
	if r.single {
		return 1
	}
	return r.hi - r.lo + 1
}

func (r *hostRange) host(i uint64) string {
	if r.single {
		return r.prefix
	}
	return r.prefix + pad(r.lo+i, r.width)
}

func (r *hostRange) clone() *hostRange { c := *r; return &c }

// pad formats n as "%0*lu".
func pad(n uint64, width int) string {
	s := strconv.FormatUint(n, 10)
	if len(s) >= width {
		return s
	}
	return strings.Repeat("0", width-len(s)) + s
}

// zeroPadded is _zero_padded: zeros needed to print num in width.
func zeroPadded(num uint64, width int) int {
	n := len(strconv.FormatUint(num, 10))
	if width > n {
		return width - n
	}
	return 0
}

// widthEquiv is _width_equiv: whether n (width *wn) and m (width *wm) can
// share one width; when they can, one of the widths is adjusted in place.
func widthEquiv(n uint64, wn *int, m uint64, wm *int) bool {
	if *wn == *wm {
		return true
	}
	npad, nmpad := zeroPadded(n, *wn), zeroPadded(n, *wm)
	mpad, mnpad := zeroPadded(m, *wm), zeroPadded(m, *wn)
	switch {
	case npad != nmpad && mpad != mnpad:
		return false
	case npad != nmpad:
		*wm = *wn
	default:
		*wn = *wm
	}
	return true
}

func widthCombine(a, b *hostRange) bool { return widthEquiv(a.lo, &a.width, b.lo, &b.width) }

// prefixCmp is hostrange_prefix_cmp: natural order of prefixes, then ranges
// with a suffix before single hosts.
func prefixCmp(a, b *hostRange) int {
	if a == nil {
		return 1
	}
	if b == nil {
		return -1
	}
	if c := natCmp(a.prefix, b.prefix); c != 0 {
		return c
	}
	// strnatcmp calls "a b" and "ab" (or a NUL and the end) equal; such
	// names cannot come out of an expression, keep them apart anyway.
	if c := strings.Compare(a.prefix, b.prefix); c != 0 {
		return c
	}
	return b2i(b.single) - b2i(a.single)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// withinRange is hostrange_within_range: both print in one bracket group.
func withinRange(a, b *hostRange) bool {
	if prefixCmp(a, b) == 0 {
		return !a.single && !b.single
	}
	return false
}

// rangeCmp is hostrange_cmp (the sort order of hostlist_sort).
func rangeCmp(a, b *hostRange) int {
	if c := prefixCmp(a, b); c != 0 {
		return c
	}
	if widthCombine(a, b) {
		// C subtracts unsigned longs and truncates to int; compare instead.
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	}
	return a.width - b.width
}

// Hostlist is an ordered list of host names stored as ranges, like Slurm's
// hostlist_t. The zero value is an empty list. Not safe for concurrent
// mutation.
type Hostlist struct {
	ranges []*hostRange
	n      int
}

// New returns a list holding hosts in order. Each argument is one literal
// host name (brackets and commas are not interpreted), as hostlist_push_host.
func New(hosts ...string) *Hostlist {
	h := &Hostlist{}
	for _, s := range hosts {
		h.Push(s)
	}
	return h
}

// Parse parses a hostlist expression (hostlist_create).
func Parse(expr string) (*Hostlist, error) {
	h := &Hostlist{}
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	for _, tok := range toks {
		if err := h.pushToken(tok); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Expand returns every host name of expr in order, duplicates kept.
func Expand(expr string) ([]string, error) {
	h, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	return h.Hosts(), nil
}

// Count returns how many hosts expr names, without expanding it.
func Count(expr string) (int, error) {
	h, err := Parse(expr)
	if err != nil {
		return 0, err
	}
	return h.Count(), nil
}

// Compress returns the ranged form of hosts in their given order, exactly as
// hostlist_ranged_string does after pushing them one by one: "n[1-3,7]".
// Each element is one literal host name.
func Compress(hosts []string) string { return New(hosts...).String() }

// CompressSorted sorts first, as `scontrol show hostlistsorted` does
// (hostlist_sort, which keeps duplicates).
func CompressSorted(hosts []string) string {
	h := New(hosts...)
	h.Sort()
	return h.String()
}

// Count returns the number of hosts (duplicates included).
func (h *Hostlist) Count() int { return h.n }

// Push appends one literal host name (hostlist_push_host).
func (h *Hostlist) Push(host string) {
	hn := newHostname(host)
	if hn.hasSuffix() {
		h.pushRange(&hostRange{prefix: hn.prefix, lo: hn.num, hi: hn.num, width: len(hn.suffix())})
		return
	}
	h.pushRange(&hostRange{prefix: host, single: true})
}

// PushList appends all hosts of o (hostlist_push_list).
func (h *Hostlist) PushList(o *Hostlist) {
	for _, r := range o.ranges {
		h.pushRange(r)
	}
}

// pushRange is hostlist_push_range: merge into the tail when r continues it.
func (h *Hostlist) pushRange(r *hostRange) {
	if k := len(h.ranges); k > 0 {
		tail := h.ranges[k-1]
		if r.lo > 0 && tail.hi == r.lo-1 && prefixCmp(tail, r) == 0 && widthCombine(tail, r) {
			tail.hi = r.hi
			h.n += int(r.count())
			return
		}
	}
	h.ranges = append(h.ranges, r.clone())
	h.n += int(r.count())
}

// Hosts returns all host names in order.
func (h *Hostlist) Hosts() []string {
	out := make([]string, 0, h.n)
	for _, r := range h.ranges {
		for i := uint64(0); i < r.count(); i++ {
			out = append(out, r.host(i))
		}
	}
	return out
}

// Nth returns the i-th host (hostlist_nth).
func (h *Hostlist) Nth(i int) (string, bool) {
	if i < 0 {
		return "", false
	}
	for _, r := range h.ranges {
		c := r.count()
		if uint64(i) < c {
			return r.host(uint64(i)), true
		}
		i -= int(c)
	}
	return "", false
}

// Find returns the index of name in the list or -1 (hostlist_find). Like
// Slurm it also matches when the zero padding moved between prefix and
// suffix: "nid00002" is found in "nid0000[2-7]".
func (h *Hostlist) Find(name string) int {
	hn := newHostname(name)
	count := 0
	for _, r := range h.ranges {
		if hn.within(r) {
			if hn.hasSuffix() {
				return count + int(hn.num-r.lo)
			}
			return count
		}
		count += int(r.count())
	}
	return -1
}

// String returns the ranged form (hostlist_ranged_string).
func (h *Hostlist) String() string {
	var b strings.Builder
	rs := h.ranges
	for i := 0; i < len(rs); {
		if i > 0 {
			b.WriteByte(',')
		}
		var next *hostRange
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		bracket := rs[i].count() > 1 || (next != nil && withinRange(rs[i], next))
		b.WriteString(rs[i].prefix)
		if bracket {
			b.WriteByte('[')
		}
		start := i
		for {
			if i > start {
				b.WriteByte(',')
			}
			writeNum(&b, rs[i])
			i++
			if i >= len(rs) || !withinRange(rs[i], rs[i-1]) {
				break
			}
		}
		if bracket {
			b.WriteByte(']')
		}
	}
	return b.String()
}

// writeNum is hostrange_numstr without the Cray zero-pad factoring.
func writeNum(b *strings.Builder, r *hostRange) {
	if r.single {
		return
	}
	b.WriteString(pad(r.lo, r.width))
	if r.lo < r.hi {
		b.WriteByte('-')
		b.WriteString(pad(r.hi, r.width))
	}
}

// Sort orders the ranges as hostlist_sort does, including its merging of
// overlapping and adjacent ranges (duplicates survive, as in Slurm).
func (h *Hostlist) Sort() {
	if len(h.ranges) <= 1 {
		return
	}
	sort.SliceStable(h.ranges, func(i, j int) bool { return rangeCmp(h.ranges[i], h.ranges[j]) < 0 })
	h.coalesce()
	h.recount()
}

// Uniq sorts and removes duplicate hosts (hostlist_uniq).
func (h *Hostlist) Uniq() {
	if len(h.ranges) <= 1 {
		return
	}
	sort.SliceStable(h.ranges, func(i, j int) bool { return rangeCmp(h.ranges[i], h.ranges[j]) < 0 })
	for i := 1; i < len(h.ranges); {
		if join(h.ranges[i-1], h.ranges[i]) {
			h.ranges = append(h.ranges[:i], h.ranges[i+1:]...)
		} else {
			i++
		}
	}
	h.recount()
}

func (h *Hostlist) recount() {
	h.n = 0
	for _, r := range h.ranges {
		h.n += int(r.count())
	}
}

// join is hostrange_join: merge b into a (a sorts before b) when they touch
// or overlap; reports whether b was absorbed.
func join(a, b *hostRange) bool {
	if prefixCmp(a, b) != 0 || !widthCombine(a, b) {
		return false
	}
	switch {
	case a.single && b.single:
		return true
	case b.lo > 0 && a.hi == b.lo-1:
		a.hi = b.hi
		return true
	case a.hi >= b.lo:
		if a.hi < b.hi {
			a.hi = b.hi
		}
		return true
	}
	return false
}

// intersect is hostrange_intersect (note the strict '>' of the C code:
// [1] and [1-3] do not intersect, so sorting "n1,n1-3" keeps n[1,1-3]).
func intersect(a, b *hostRange) *hostRange {
	if a.single || b.single {
		return nil
	}
	if a.hi > b.lo && prefixCmp(a, b) == 0 && widthCombine(a, b) {
		n := a.clone()
		n.lo = b.lo
		n.hi = min(a.hi, b.hi)
		return n
	}
	return nil
}

func (h *Hostlist) insertRange(r *hostRange, at int) {
	h.ranges = append(h.ranges, nil)
	copy(h.ranges[at+1:], h.ranges[at:])
	h.ranges[at] = r.clone()
}

func (h *Hostlist) deleteRange(at int) { h.ranges = append(h.ranges[:at], h.ranges[at+1:]...) }

// coalesce ports hostlist_coalesce + hostlist_collapse step by step so that
// sorted output matches `scontrol show hostlistsorted` even for overlapping
// input.
func (h *Hostlist) coalesce() {
	for i := len(h.ranges) - 1; i > 0; i-- {
		n := intersect(h.ranges[i-1], h.ranges[i])
		if n == nil {
			continue
		}
		prev, next := h.ranges[i-1], h.ranges[i]
		j := i
		if n.hi < prev.hi {
			next.hi = prev.hi
		}
		prev.hi = n.lo
		next.lo = n.hi
		if prev.hi < prev.lo {
			h.deleteRange(i)
		}
		for n.lo <= n.hi {
			one := &hostRange{prefix: n.prefix, lo: n.lo, hi: n.lo, width: n.width}
			if n.lo > prev.hi {
				h.insertRange(one, j)
				j++
			}
			if n.lo < next.lo {
				h.insertRange(one, j)
				j++
			}
			if n.lo == n.hi { // avoid wrap at MaxUint64
				break
			}
			n.lo++
		}
		i = len(h.ranges)
	}
	for i := len(h.ranges) - 1; i > 0; i-- {
		prev, next := h.ranges[i-1], h.ranges[i]
		if next.lo > 0 && prev.hi == next.lo-1 && prefixCmp(prev, next) == 0 && widthCombine(prev, next) {
			prev.hi = next.hi
			h.deleteRange(i)
		}
	}
}

// hostname mirrors hostname_t: a name split into prefix and numeric suffix.
type hostname struct {
	name      string
	prefix    string
	suffixAt  int // index of the suffix in name, -1 when none
	num       uint64
	numParsed bool
}

func (hn *hostname) hasSuffix() bool { return hn.suffixAt >= 0 }
func (hn *hostname) suffix() string  { return hn.name[hn.suffixAt:] }

// newHostname is hostname_create for one dimension. A numeric suffix that
// does not fit in 64 bits is treated as part of the name (Slurm would
// saturate it and print a different name).
func newHostname(name string) *hostname {
	i := len(name)
	for i > 0 && isDigit(name[i-1]) {
		i--
	}
	hn := &hostname{name: name, prefix: name, suffixAt: -1}
	if i == len(name) {
		return hn
	}
	n, err := strconv.ParseUint(name[i:], 10, 64)
	if err != nil {
		return hn
	}
	hn.prefix, hn.suffixAt, hn.num = name[:i], i, n
	return hn
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// within is hostrange_hn_within, including its habit of shifting digits
// between prefix and suffix (and keeping that change for later ranges).
func (hn *hostname) within(r *hostRange) bool {
	if r.single {
		return hn.name == r.prefix
	}
	if !hn.hasSuffix() {
		return false
	}
	if r.prefix != hn.prefix {
		l1, l2 := len(r.prefix), len(hn.prefix)
		if l1 == l2 {
			return false
		}
		ldiff := l1 - l2
		switch {
		case ldiff > 0 && len(hn.suffix()) >= ldiff:
			hn.prefix += hn.name[hn.suffixAt : hn.suffixAt+ldiff]
		case ldiff < 0:
			hn.prefix = hn.prefix[:l2+ldiff]
		default:
			return false
		}
		hn.suffixAt += ldiff
		hn.num = leadingUint(hn.suffix())
		if r.prefix != hn.prefix {
			return false
		}
	}
	if hn.num <= r.hi && hn.num >= r.lo {
		w := len(hn.suffix())
		return widthEquiv(r.lo, &r.width, hn.num, &w)
	}
	return false
}

// leadingUint is strtoul(s, NULL, 10) for the digit run at the start of s.
func leadingUint(s string) uint64 {
	var n uint64
	for i := 0; i < len(s) && isDigit(s[i]); i++ {
		d := uint64(s[i] - '0')
		if n > (^uint64(0)-d)/10 {
			return ^uint64(0)
		}
		n = n*10 + d
	}
	return n
}

// tokenize splits expr at separators outside brackets. Brackets may not nest
// and every '[' needs a ']'; a ']' outside brackets is an ordinary character
// (Slurm accepts it in names).
func tokenize(expr string) ([]string, error) {
	var toks []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch c := expr[i]; {
		case c == '[':
			if depth > 0 {
				return nil, fmt.Errorf("%w: nested '[' in %q", ErrSyntax, expr)
			}
			depth = 1
		case c == ']':
			depth = 0
		case depth == 0 && isSep(c):
			if i > start {
				toks = append(toks, expr[start:i])
			}
			start = i + 1
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%w: unbalanced '[' in %q", ErrSyntax, expr)
	}
	if start < len(expr) {
		toks = append(toks, expr[start:])
	}
	return toks, nil
}

type numRange struct {
	lo, hi uint64
	width  int
}

// pushToken handles one item of an expression (_hostlist_create_bracketed).
func (h *Hostlist) pushToken(tok string) error {
	p := strings.LastIndexByte(tok, '[')
	if p < 0 {
		h.Push(tok)
		return h.checkSize(tok)
	}
	q := strings.IndexByte(tok[p:], ']') + p
	if q != len(tok)-1 {
		return fmt.Errorf("%w: %q: text after the last ']'", ErrSyntax, tok)
	}
	rs, err := parseRangeList(tok[p+1:q], tok)
	if err != nil {
		return err
	}
	return h.pushRangeList(tok[:p], rs, tok)
}

// pushRangeList is _push_range_list: the prefix may itself hold bracket
// groups, expanded from the right so the left-most group varies fastest.
func (h *Hostlist) pushRangeList(prefix string, rs []numRange, tok string) error {
	p := strings.LastIndexByte(prefix, '[')
	if p < 0 {
		for _, r := range rs {
			h.pushRange(&hostRange{prefix: prefix, lo: r.lo, hi: r.hi, width: r.width})
			if err := h.checkSize(tok); err != nil {
				return err
			}
		}
		return nil
	}
	q := strings.IndexByte(prefix[p:], ']')
	if q < 0 {
		return fmt.Errorf("%w: unbalanced '[' in %q", ErrSyntax, tok)
	}
	q += p
	prs, err := parseRangeList(prefix[p+1:q], tok)
	if err != nil {
		return err
	}
	var cnt uint64
	for _, pr := range prs {
		cnt += pr.hi - pr.lo + 1
		if cnt > MaxPrefixCount {
			return fmt.Errorf("%w: %q: more than %d hosts in a prefix range", ErrTooLarge, tok, MaxPrefixCount)
		}
		for j := pr.lo; ; j++ {
			np := prefix[:p] + pad(j, pr.width) + prefix[q+1:]
			if err := h.pushRangeList(np, rs, tok); err != nil {
				return err
			}
			if j == pr.hi {
				break
			}
		}
	}
	return nil
}

func (h *Hostlist) checkSize(tok string) error {
	if h.n > MaxHosts {
		return fmt.Errorf("%w: %q: more than %d hosts", ErrTooLarge, tok, MaxHosts)
	}
	return nil
}

// parseRangeList is _parse_range_list: "1-3,7,09-10".
func parseRangeList(s, tok string) ([]numRange, error) {
	items := strings.Split(s, ",")
	if len(items) > MaxRanges {
		return nil, fmt.Errorf("%w: %q: more than %d ranges", ErrTooLarge, tok, MaxRanges)
	}
	out := make([]numRange, 0, len(items))
	for _, it := range items {
		r, err := parseSingleRange(it, tok)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// parseSingleRange is _parse_single_range, limited to plain digits (Slurm's
// strtoul would also take "+1" or " 1").
func parseSingleRange(s, tok string) (numRange, error) {
	bad := func(why string) (numRange, error) {
		return numRange{}, fmt.Errorf("%w: %q: range %q %s", ErrSyntax, tok, s, why)
	}
	loS, hiS, dash := strings.Cut(s, "-")
	if loS == "" || !allDigits(loS) {
		return bad("needs a number")
	}
	lo, err := strconv.ParseUint(loS, 10, 64)
	if err != nil {
		return bad("is out of range")
	}
	hi := lo
	if dash && hiS != "" { // "lo-" means lo, as in Slurm
		if !allDigits(hiS) {
			return bad("has a bad upper bound")
		}
		if hi, err = strconv.ParseUint(hiS, 10, 64); err != nil {
			return bad("is out of range")
		}
	}
	if lo > hi {
		return bad("is reversed")
	}
	if hi-lo >= MaxRange {
		return numRange{}, fmt.Errorf("%w: %q: more than %d hosts in range %q", ErrTooLarge, tok, MaxRange, s)
	}
	return numRange{lo: lo, hi: hi, width: len(loS)}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// natCmp is strnatcmp (src/common/strnatcmp.c): digit runs compare by value,
// runs starting with '0' compare left-aligned, spaces are skipped, other
// bytes compare as signed chars.
func natCmp(a, b string) int {
	at := func(s string, i int) int8 {
		if i < len(s) {
			return int8(s[i])
		}
		return 0
	}
	dig := func(c int8) bool { return c >= '0' && c <= '9' }
	space := func(c int8) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
	ai, bi := 0, 0
	for {
		ca, cb := at(a, ai), at(b, bi)
		for space(ca) {
			ai++
			ca = at(a, ai)
		}
		for space(cb) {
			bi++
			cb = at(b, bi)
		}
		if dig(ca) && dig(cb) {
			var r int
			if ca == '0' || cb == '0' {
				r = cmpLeft(a[ai:], b[bi:])
			} else {
				r = cmpRight(a[ai:], b[bi:])
			}
			if r != 0 {
				return r
			}
		}
		if ca == 0 && cb == 0 {
			return 0
		}
		if ca < cb {
			return -1
		}
		if ca > cb {
			return 1
		}
		ai++
		bi++
	}
}

func digitAt(s string, i int) bool { return i < len(s) && isDigit(s[i]) }

func cmpRight(a, b string) int {
	bias := 0
	for i := 0; ; i++ {
		da, db := digitAt(a, i), digitAt(b, i)
		switch {
		case !da && !db:
			return bias
		case !da:
			return -1
		case !db:
			return 1
		case a[i] < b[i] && bias == 0:
			bias = -1
		case a[i] > b[i] && bias == 0:
			bias = 1
		}
	}
}

func cmpLeft(a, b string) int {
	for i := 0; ; i++ {
		da, db := digitAt(a, i), digitAt(b, i)
		switch {
		case !da && !db:
			return 0
		case !da:
			return -1
		case !db:
			return 1
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
}
