//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// watchedEvents are the NVML events health listens to.
const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

// Watch streams faults: XID and double-bit ECC events from an NVML event
// set, and, every PollInterval, row-remap failures, new uncorrectable ECC
// errors and fabric state. After the first poll it sends a CauseSync event:
// the faults sent so far are the node's state at start.
func (p *provider) Watch(ctx context.Context) (<-chan Event, error) {
	devs, lut, err := p.handles()
	if err != nil {
		return nil, err
	}
	es, ret := p.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, nvErr("EventSetCreate", ret)
	}
	byUUID := map[string]int{}
	for i, d := range devs {
		if d == nil {
			continue
		}
		uuid, _ := d.GetUUID()
		byUUID[uuid] = i
		types, ret := d.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			p.log.Warn("GPU event types", "index", i, "error", ret.Error())
			continue
		}
		if ret := d.RegisterEvents(types&watchedEvents, es); ret != nvml.SUCCESS {
			p.log.Warn("GPU events not watched", "index", i, "error", ret.Error())
		}
	}
	ch := make(chan Event, 16)
	send := func(e Event) bool {
		e.Time = time.Now()
		if e.Index >= 0 && e.Index < len(lut) {
			e.PCIBusID = lut[e.Index]
		}
		select {
		case ch <- e:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer es.Free()
		p.events(ctx, es, byUUID, send)
	}()
	go func() {
		defer wg.Done()
		p.poll(ctx, devs, send)
	}()
	go func() { wg.Wait(); close(ch) }()
	return ch, nil
}

func (p *provider) events(ctx context.Context, es nvml.EventSet, byUUID map[string]int, send func(Event) bool) {
	ms := uint32(p.o.EventWait / time.Millisecond)
	for ctx.Err() == nil {
		e, ret := es.Wait(ms)
		if ret == nvml.ERROR_TIMEOUT {
			continue
		}
		if ret != nvml.SUCCESS {
			// As the device plugin: a failing wait makes every GPU suspect.
			if !send(Event{Index: -1, Cause: CauseWatchError, Detail: "NVML event wait failed: " + ret.Error()}) {
				return
			}
			select { // do not spin on a persistent error
			case <-ctx.Done():
				return
			case <-time.After(p.o.PollInterval):
			}
			continue
		}
		idx, uuid := -1, ""
		if e.Device != nil {
			uuid, _ = e.Device.GetUUID()
			if i, ok := byUUID[uuid]; ok {
				idx = i
			}
		}
		ev := Event{Index: idx, UUID: uuid}
		switch {
		case e.EventType&nvml.EventTypeXidCriticalError != 0:
			if idx >= 0 {
				p.mu.Lock()
				p.lastXID[idx] = e.EventData // exported as DCGM_FI_DEV_XID_ERRORS
				p.mu.Unlock()
			}
			if IsApplicationXID(e.EventData) {
				p.log.Debug("application XID ignored", "index", idx, "xid", e.EventData)
				continue
			}
			ev.Cause, ev.Detail = CauseXID, fmt.Sprintf("XID %d", e.EventData)
			if e.GpuInstanceId != NoInstance && e.ComputeInstanceId != NoInstance {
				ev.Detail += fmt.Sprintf(" on MIG GI %d CI %d", e.GpuInstanceId, e.ComputeInstanceId)
			}
		case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
			ev.Cause, ev.Detail = CauseECC, "uncorrectable (double-bit) ECC error"
		default:
			continue
		}
		if !send(ev) {
			return
		}
	}
}

// pollState is what the last poll saw of one GPU.
type pollState struct {
	remapFail bool
	fabricBad string // "" when healthy
	eccBase   uint64
	eccSeen   bool
	eccFault  bool
}

func (p *provider) poll(ctx context.Context, devs []nvml.Device, send func(Event) bool) {
	st := make([]pollState, len(devs))
	first := true
	t := time.NewTicker(p.o.PollInterval)
	defer t.Stop()
	for {
		for i, d := range devs {
			if d == nil {
				continue
			}
			uuid, _ := d.GetUUID()
			s := &st[i]
			if _, _, _, failed, ret := d.GetRemappedRows(); ret == nvml.SUCCESS && failed != s.remapFail {
				s.remapFail = failed
				if !send(Event{Index: i, UUID: uuid, Cause: CauseRowRemap, Healthy: !failed, Detail: "row remapping failure"}) {
					return
				}
			}
			bad := ""
			if f := fabricOf(d); f.Supported {
				switch {
				case f.State != FabricCompleted:
					bad = "fabric state " + f.State.String()
				case f.Status != 0:
					bad = fmt.Sprintf("fabric registration status %d", f.Status)
				}
			}
			if bad != s.fabricBad {
				detail := bad
				if bad == "" {
					detail = s.fabricBad
				}
				s.fabricBad = bad
				if !send(Event{Index: i, UUID: uuid, Cause: CauseFabric, Healthy: bad == "", Detail: detail}) {
					return
				}
			}
			// Uncorrectable ECC errors since the daemon started (the
			// volatile counter resets only with the driver).
			if n, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
				if !s.eccSeen {
					s.eccBase, s.eccSeen = n, true
				} else if n > s.eccBase && !s.eccFault {
					s.eccFault = true
					if !send(Event{Index: i, UUID: uuid, Cause: CauseECC, Detail: fmt.Sprintf("%d uncorrectable ECC errors", n-s.eccBase)}) {
						return
					}
				}
			}
		}
		if first {
			first = false
			if !send(Event{Index: -1, Cause: CauseSync}) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
