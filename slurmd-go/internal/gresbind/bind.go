package gresbind

import (
	"strings"
)

// Accel bind bits of slurm.h (srun --accel-bind).
const (
	accelBindClosestGPU = 0x02
	accelBindClosestNIC = 0x08
)

// usable is _get_usable_gres: the devices of plugin p that task localID
// may use (env: getDevices false; device cgroup: true). nil with ok means
// no binding for this plugin; !ok is stock's SLURM_ERROR (the plugin is
// skipped for this task).
func (n *Node) usable(p *Plugin, localID int, l *Launch, a alloc, getDevices bool) (bits, bool) {
	if n.v2411() {
		return n.usable2411(p, localID, l, a, getDevices)
	}
	return n.usable2205(p, localID, l, a, getDevices)
}

// bind2205 is 22.05's tres_bind_t (_parse_tres_bind).
type bind2205 struct {
	bindGPU, bindNIC bool
	tasksPerGres     int
	mapGPU, maskGPU  string
	hasMap, hasMask  bool
	gpusPerTask      uint64
}

func parseBind2205(accel uint16, s string) bind2205 {
	var b bind2205
	b.bindGPU = accel&accelBindClosestGPU != 0
	b.bindNIC = accel&accelBindClosestNIC != 0
	i := strings.Index(s, "gpu:")
	if b.bindGPU || i < 0 {
		return b
	}
	sep := s[i+4:]
	if hasPrefixFold(sep, "verbose,") {
		sep = sep[8:]
	}
	switch {
	case hasPrefixFold(sep, "single:"):
		v, _ := strtol(sep[7:])
		if v <= 0 || v > 1<<32-1 {
			v = 1
		}
		b.tasksPerGres = int(v)
		b.bindGPU = true
	case hasPrefixFold(sep, "closest"):
		b.bindGPU = true
	case hasPrefixFold(sep, "map_gpu:"):
		b.mapGPU, b.hasMap = sep[8:], true
	case hasPrefixFold(sep, "mask_gpu:"):
		b.maskGPU, b.hasMask = sep[9:], true
	case hasPrefixFold(sep, "per_task:"):
		v, _ := strtoul(sep[9:])
		b.gpusPerTask = v
	}
	return b
}

func (n *Node) usable2205(p *Plugin, localID int, l *Launch, a alloc, getDevices bool) (bits, bool) {
	b := parseBind2205(l.AccelBindType, l.TresBind)
	if !b.bindGPU && !b.bindNIC && !b.hasMap && !b.hasMask && b.gpusPerTask == 0 {
		return nil, true
	}
	if a.bits == nil {
		return nil, true
	}
	local := n.LocalIndex
	var u bits
	switch {
	case p.Name != gpuName:
		return nil, false // nic binding is not modelled; others have none
	case b.hasMap:
		u = mapOrMask(b.mapGPU, localID, a.bits, true, getDevices, local)
	case b.hasMask:
		u = mapOrMask(b.maskGPU, localID, a.bits, false, getDevices, local)
	case b.bindGPU:
		// No Cores= affinity: every allocated device is close.
		u = a.bits.clone()
		filterSingle(u, b.tasksPerGres, localID)
		if !getDevices && local {
			u.consolidate()
		}
	case b.gpusPerTask > 0:
		if !getDevices && local {
			u = newBits(len(a.bits))
			for i := 0; i < int(b.gpusPerTask) && i < len(u); i++ {
				u[i] = true
			}
		} else {
			u = a.bits.clone()
			filterPerTask2205(u, int(b.gpusPerTask), localID)
		}
	default:
		return nil, false
	}
	if u == nil {
		return nil, true
	}
	if u.count() == 0 {
		if !getDevices && local {
			u.set(0)
		} else {
			u.set(a.bits.ffs())
		}
	}
	return u, true
}

// filterSingle is 22.05's _filter_usable_gres (--gpu-bind=single:N): the
// task gets one device, by block distribution of the tasks.
func filterSingle(u bits, tasksPerGres, localID int) {
	if tasksPerGres <= 0 {
		return
	}
	c := u.count()
	if c <= 1 {
		return
	}
	idx := u.nth((localID / tasksPerGres) % c)
	if idx < 0 {
		return
	}
	for i := range u {
		u[i] = i == idx
	}
}

// filterPerTask2205 is 22.05's _filter_gres_per_task: skip the devices of
// the tasks before, keep n.
func filterPerTask2205(u bits, n, localID int) {
	skip := localID * n
	for i := range u {
		if !u[i] {
			continue
		}
		switch {
		case skip > 0:
			u[i] = false
			skip--
		case n > 0:
			n--
		default:
			u[i] = false
		}
	}
}

// mapOrMask is _get_usable_gres_map_or_mask: the task's entry of a
// map_gpu/mask_gpu list (cycled when there are more tasks than entries;
// "v*k" repeats v for k tasks).
func mapOrMask(list string, localID int, alloc bits, isMap, getDevices, local bool) bits {
	if list == "" {
		return nil
	}
	size := len(alloc)
	minV, maxV := int64(0), int64(size-1)
	if !isMap {
		minV, maxV = 1, int64(^(-1<<size))&0x7fffffff
		if size >= 31 {
			maxV = 1<<31 - 1
		}
	}
	var u bits
	offset := 0
	for u == nil {
		toks := strings.Split(list, ",")
		progress := false
		for _, tok := range toks {
			if tok == "" {
				continue // strtok skips empty tokens
			}
			progress = true
			mult := 1
			if j := strings.IndexByte(tok, '*'); j >= 0 {
				m, _ := strtol(tok[j+1:])
				mult = int(m)
				if mult == 0 {
					mult = 1
				}
			}
			if localID >= offset && localID <= offset+mult-1 {
				v, _ := strtol(tok)
				u = newBits(size)
				if v < minV || v > maxV {
					goto end
				}
				if isMap {
					u.set(int(v))
				} else {
					for i := 0; i < size; i++ {
						if (v>>uint(i))&1 != 0 {
							u.set(i)
						}
					}
				}
				break
			}
			offset += mult
		}
		if !progress {
			return nil
		}
	}
end:
	if local {
		if getDevices {
			u = toGlobal(u, alloc)
		} else {
			u.and(alloc)
			u.consolidate()
		}
	} else {
		u.and(alloc)
	}
	return u
}

// toGlobal is _translate_step_to_global_device_index: local bit i is the
// i-th allocated device.
func toGlobal(u, alloc bits) bits {
	out := newBits(len(alloc))
	k := 0
	for i := range alloc {
		if alloc[i] {
			if u.test(k) {
				out[i] = true
			}
			k++
		}
	}
	return out
}

func (n *Node) usable2411(p *Plugin, localID int, l *Launch, a alloc, getDevices bool) (bits, bool) {
	if a.bits == nil || l.TresBind == "" {
		return nil, true
	}
	key := "gres/" + p.Name + ":"
	i := strings.Index(l.TresBind, key)
	if i < 0 {
		return nil, true
	}
	sep := l.TresBind[i+len(key):]
	if hasPrefixFold(sep, "verbose,") {
		sep = sep[8:]
	}
	local := n.localIndex(p)
	var u bits
	if !p.Shared {
		switch {
		case hasPrefixFold(sep, "map_gpu:"):
			u = mapOrMask(sep[8:], localID, a.bits, true, getDevices, local)
		case hasPrefixFold(sep, "mask_gpu:"):
			u = mapOrMask(sep[9:], localID, a.bits, false, getDevices, local)
		case hasPrefixFold(sep, "map:"):
			u = mapOrMask(sep[4:], localID, a.bits, true, getDevices, local)
		case hasPrefixFold(sep, "mask:"):
			u = mapOrMask(sep[5:], localID, a.bits, false, getDevices, local)
		case hasPrefixFold(sep, "single:"):
			if !getDevices && local {
				u = newBits(len(a.bits))
				u.set(0)
			} else {
				// _get_single_usable_gres without Cores=: tasks take the
				// slots in order, ntasks_per_gres to a device.
				v, _ := strtoul(sep[7:])
				u = single2411(a.bits, int(v), localID)
			}
		case hasPrefixFold(sep, "closest"):
			u = a.bits.clone()
			if !getDevices && local {
				u.consolidate()
			}
		case hasPrefixFold(sep, "per_task:"):
			v, _ := strtoul(sep[9:])
			if !getDevices && local {
				u = newBits(len(a.bits))
				for i := 0; i < int(v) && i < len(u); i++ {
					u[i] = true
				}
			} else {
				u = perTask2411(a.bits, int(v), localID)
			}
		case hasPrefixFold(sep, "none"):
			u = a.bits.clone()
		default:
			return nil, false
		}
	} else {
		switch {
		case hasPrefixFold(sep, "per_task:"):
			v, _ := strtoul(sep[9:])
			u = sharedPerTask(a.bits, a.perBit, v, localID)
			if !getDevices && local {
				u.consolidate()
			}
		case hasPrefixFold(sep, "none"):
			u = a.bits.clone()
		default:
			return nil, false
		}
	}
	if u != nil && u.count() == 0 {
		if !getDevices && local {
			u.set(0)
		} else {
			u.set(a.bits.ffs())
		}
	}
	return u, true
}

// perTask2411 is _get_gres_per_task without Cores= affinity: each task
// before this one takes its n devices from what is left, in order.
func perTask2411(alloc bits, n, localID int) bits {
	u := newBits(len(alloc))
	avail := alloc.clone()
	for t := 0; t <= localID; t++ {
		need := n
		for i := 0; need > 0 && i < len(avail); i++ {
			if !avail[i] {
				continue
			}
			need--
			avail[i] = false
			if t == localID {
				u[i] = true
			}
		}
		if need > 0 {
			break // "Not enough gres to bind"
		}
	}
	return u
}

// single2411 is _get_single_usable_gres without Cores=: tasks fill the
// device slots (ntasks_per_gres per device) in order.
func single2411(alloc bits, tasksPerGres, localID int) bits {
	c := alloc.count()
	if c <= 1 {
		return alloc.clone()
	}
	if tasksPerGres <= 0 {
		tasksPerGres = 1
	}
	u := newBits(len(alloc))
	if localID >= c*tasksPerGres {
		u.set(alloc.nth(localID % c)) // no free slot: block distribution
		return u
	}
	u.set(alloc.nth(localID / tasksPerGres))
	return u
}

// sharedPerTask is _get_shared_gres_per_task without Cores= affinity: a
// single device with enough shares left first, then shares from any
// devices, for each task up to this one.
func sharedPerTask(alloc bits, perBit []uint64, n uint64, localID int) bits {
	u := newBits(len(alloc))
	avail := make([]uint64, len(alloc))
	copy(avail, perBit)
	for t := 0; t <= localID; t++ {
		need := n
		for _, single := range []bool{true, false} {
			for i := 0; need > 0 && i < len(alloc); i++ {
				if !alloc[i] {
					continue
				}
				dec := min(avail[i], need)
				floor := uint64(1)
				if single {
					floor = need
				}
				if dec < floor {
					continue
				}
				avail[i] -= dec
				need -= dec
				if t == localID {
					u[i] = true
				}
			}
		}
		if need > 0 {
			break
		}
	}
	return u
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// strtol parses a C strtol(s, NULL, 0) prefix: optional sign, 0x hex, 0
// octal, decimal; what follows the digits is ignored.
func strtol(s string) (int64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	base := int64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isDigit(s[2], 16):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	var v int64
	ok := false
	for i := 0; i < len(s) && isDigit(s[i], base); i++ {
		v = v*base + digitVal(s[i])
		ok = true
		if v > 1<<40 {
			v = 1 << 40 // saturate: any such value is out of range anyway
		}
	}
	if neg {
		v = -v
	}
	return v, ok
}

// strtoul is slurm_atoul's decimal strtoul; negative input wraps, as C.
func strtoul(s string) (uint64, bool) {
	v, ok := strtol(s)
	return uint64(v), ok
}

func isDigit(c byte, base int64) bool {
	v := int64(-1)
	switch {
	case c >= '0' && c <= '9':
		v = int64(c - '0')
	case c >= 'a' && c <= 'f':
		v = int64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		v = int64(c-'A') + 10
	}
	return v >= 0 && v < base
}

func digitVal(c byte) int64 {
	switch {
	case c >= '0' && c <= '9':
		return int64(c - '0')
	case c >= 'a' && c <= 'f':
		return int64(c-'a') + 10
	default:
		return int64(c-'A') + 10
	}
}
