package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// delayQueue is a userspace delay line on one netfilter queue
// (nfnetlink_queue): every packet a rule sends to its number (iptables
// -j NFQUEUE --queue-num) is held for the current delay and then accepted, in
// the order it arrived. It stands in for tc netem, which the harness cannot
// count on: this machine's kernel is built without sch_netem (and without
// sch_prio), while nfnetlink_queue and xt_NFQUEUE are in every kernel that has
// iptables. Only packet metadata is copied to userspace (NFQNL_COPY_META), a
// TCP segmentation-offload packet stays one queued packet (NFQA_CFG_F_GSO: the
// kernel would otherwise cut it into MSS-sized packets first, and the per-packet
// cost in userspace, not the delay, would set the throughput between zones), and
// packets whose time has come are accepted together (NFQNL_MSG_VERDICT_BATCH).
type delayQueue struct {
	num   uint16
	f     *os.File // the NETLINK_NETFILTER socket, non-blocking (poller: Close unblocks Read)
	delay atomic.Int64
	seq   atomic.Uint32
	held  chan heldPacket
	done  chan struct{}
	wg    sync.WaitGroup

	errMu sync.Mutex
	err   error // first error of the reader or the releaser; guarded by errMu
}

type heldPacket struct {
	id uint32
	at time.Time // accepted then
}

// nfnetlink_queue constants (linux/netfilter/nfnetlink{,_queue}.h).
const (
	nfnlSubsysQueue     = 3
	nfqnlMsgPacket      = 0
	nfqnlMsgVerdict     = 1
	nfqnlMsgConfig      = 2
	nfqnlMsgVerdictBat  = 3 // verdict on every queued packet up to an id
	nfqaPacketHdr       = 1
	nfqaVerdictHdr      = 2
	nfqaCfgCmd          = 1
	nfqaCfgParams       = 2
	nfqaCfgQueueMaxlen  = 3
	nfqaCfgMask         = 4
	nfqaCfgFlags        = 5
	nfqaCfgFGSO         = 1 << 2
	nfqnlCfgCmdBind     = 1
	nfqnlCopyMeta       = 1
	nfAccept            = 1
	nlaTypeMask         = 0x3fff
	delayQueueMaxlen    = 8192    // packets the kernel keeps queued for us
	delayQueueRcvbuf    = 8 << 20 // bytes
	delayQueueHeldSlots = 65536   // packets held at once before the reader waits
	delayQueueAckWait   = 5 * time.Second
	delayQueueBatch     = 256                    // packets per batch verdict at most, so a steady flow is not held back
	delayQueueSleepMax  = 100 * time.Millisecond // one sleep at most, so close is seen soon
)

// openDelayQueue binds queue num (an error if another socket has it) with
// delay d.
func openDelayQueue(num uint16, d time.Duration) (*delayQueue, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("cluster: netfilter queue socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("cluster: bind netfilter queue socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, delayQueueRcvbuf)
	q := &delayQueue{
		num:  num,
		f:    os.NewFile(uintptr(fd), "nfqueue"),
		held: make(chan heldPacket, delayQueueHeldSlots),
		done: make(chan struct{}),
	}
	q.delay.Store(int64(d))
	cmd := []byte{nfqnlCfgCmdBind, 0, 0, syscall.AF_INET} // command, pad, be16 pf (ignored since Linux 3.8)
	params := []byte{0, 0, 0, 0, nfqnlCopyMeta}           // be32 copy_range, copy_mode
	maxlen := binary.BigEndian.AppendUint32(nil, delayQueueMaxlen)
	gso := binary.BigEndian.AppendUint32(nil, nfqaCfgFGSO)
	for _, as := range [][][]byte{{nlAttr(nfqaCfgCmd, cmd)}, {nlAttr(nfqaCfgParams, params)}, {nlAttr(nfqaCfgQueueMaxlen, maxlen)},
		{nlAttr(nfqaCfgFlags, gso), nlAttr(nfqaCfgMask, gso)}} {
		if err := q.request(nfqnlMsgConfig, as...); err != nil {
			q.f.Close()
			return nil, fmt.Errorf("cluster: netfilter queue %d: %w", num, err)
		}
	}
	q.wg.Add(2)
	go q.read()
	go q.release()
	return q, nil
}

// setDelay changes the delay of packets queued from now on.
func (q *delayQueue) setDelay(d time.Duration) { q.delay.Store(int64(d)) }

// close unbinds the queue (packets still held are dropped by the kernel) and
// returns the first error the queue met.
func (q *delayQueue) close() error {
	close(q.done)
	q.f.Close()
	q.wg.Wait()
	q.errMu.Lock()
	defer q.errMu.Unlock()
	return q.err
}

func (q *delayQueue) fail(err error) {
	q.errMu.Lock()
	defer q.errMu.Unlock()
	if q.err == nil {
		q.err = fmt.Errorf("cluster: netfilter queue %d: %w", q.num, err)
	}
}

// nlAttr is one netlink attribute, padded to 4 bytes.
func nlAttr(typ uint16, data []byte) []byte {
	n := 4 + len(data)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], data)
	return b
}

// message is an nfnetlink queue message: nlmsghdr, nfgenmsg (AF_UNSPEC,
// NFNETLINK_V0, be16 queue number), attributes.
func (q *delayQueue) message(typ, flags uint16, attrs ...[]byte) []byte {
	b := make([]byte, 20)
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|typ)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(b[8:], q.seq.Add(1))
	b[16] = unix.AF_UNSPEC
	binary.BigEndian.PutUint16(b[18:], q.num)
	for _, a := range attrs {
		b = append(b, a...)
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	return b
}

// request sends one message with NLM_F_ACK and waits for the kernel's answer
// (before the reader runs).
func (q *delayQueue) request(typ uint16, attrs ...[]byte) error {
	msg := q.message(typ, unix.NLM_F_ACK, attrs...)
	seq := binary.NativeEndian.Uint32(msg[8:])
	if _, err := q.f.Write(msg); err != nil {
		return err
	}
	if err := q.f.SetReadDeadline(time.Now().Add(delayQueueAckWait)); err != nil {
		return err
	}
	defer q.f.SetReadDeadline(time.Time{})
	buf := make([]byte, 8192)
	for {
		n, err := q.f.Read(buf)
		if err != nil {
			return fmt.Errorf("waiting for the kernel's ack: %w", err)
		}
		for b := buf[:n]; len(b) >= 16; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			if l < 16 || l > len(b) {
				break
			}
			if binary.NativeEndian.Uint16(b[4:]) == unix.NLMSG_ERROR && binary.NativeEndian.Uint32(b[8:]) == seq && l >= 20 {
				if e := int32(binary.NativeEndian.Uint32(b[16:])); e != 0 {
					return syscall.Errno(-e)
				}
				return nil
			}
			next := (l + 3) &^ 3
			if next >= len(b) {
				break
			}
			b = b[next:]
		}
	}
}

// read takes every queued packet's id and hands it to release with its time.
func (q *delayQueue) read() {
	defer q.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, err := q.f.Read(buf)
		if err != nil {
			if errors.Is(err, syscall.ENOBUFS) {
				continue // the kernel dropped some (queue full); go on
			}
			select {
			case <-q.done:
			default:
				q.fail(err)
			}
			return
		}
		now := time.Now()
		for b := buf[:n]; len(b) >= 20; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			if l < 16 || l > len(b) {
				break
			}
			if binary.NativeEndian.Uint16(b[4:]) == nfnlSubsysQueue<<8|nfqnlMsgPacket {
				if id, ok := packetID(b[20:l]); ok {
					select {
					case q.held <- heldPacket{id: id, at: now.Add(time.Duration(q.delay.Load()))}:
					case <-q.done:
						return
					}
				}
			}
			next := (l + 3) &^ 3
			if next >= len(b) {
				break
			}
			b = b[next:]
		}
	}
}

// packetID is NFQA_PACKET_HDR's be32 packet_id among attrs.
func packetID(attrs []byte) (uint32, bool) {
	for len(attrs) >= 4 {
		l := int(binary.NativeEndian.Uint16(attrs[0:]))
		if l < 4 || l > len(attrs) {
			return 0, false
		}
		if binary.NativeEndian.Uint16(attrs[2:])&nlaTypeMask == nfqaPacketHdr && l >= 8 {
			return binary.BigEndian.Uint32(attrs[4:]), true
		}
		next := (l + 3) &^ 3
		if next >= len(attrs) {
			break
		}
		attrs = attrs[next:]
	}
	return 0, false
}

// release accepts held packets once their time has come, every packet already
// due in one batch verdict: ids grow in the order the kernel queued the packets,
// which is the order they are held in, so "up to the last due id" is exact. (A
// packet whose notice the socket dropped, ENOBUFS, goes with the next batch
// rather than staying queued for ever.)
func (q *delayQueue) release() {
	defer q.wg.Done()
	// nanosleep, not a Go timer: the runtime's timers wake through epoll_pwait,
	// whose timeout is in milliseconds, so every sub-millisecond wait would round
	// up to 1 ms (measured: a 0.25 ms delay made a 2.5 ms round trip); an hrtimer sleep on this
	// goroutine's own thread keeps the delay within tens of microseconds.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wait := func(at time.Time) bool {
		for {
			select {
			case <-q.done:
				return false
			default:
			}
			d := time.Until(at)
			if d <= 0 {
				return true
			}
			ts := unix.NsecToTimespec(int64(min(d, delayQueueSleepMax)))
			_ = unix.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
		}
	}
	for {
		var p heldPacket
		select {
		case p = <-q.held:
		case <-q.done:
			return
		}
		if !wait(p.at) {
			return
		}
		last := p.id
	more:
		for k := 1; k < delayQueueBatch; k++ {
			select {
			case n := <-q.held:
				if time.Until(n.at) > 0 {
					if !q.verdict(last) || !wait(n.at) {
						return
					}
				}
				last = n.id
			default:
				break more
			}
		}
		if !q.verdict(last) {
			return
		}
	}
}

// verdict accepts every queued packet with an id up to id; false once the
// queue is closed or broken.
func (q *delayQueue) verdict(id uint32) bool {
	v := binary.BigEndian.AppendUint32(nil, nfAccept)
	v = binary.BigEndian.AppendUint32(v, id)
	if _, err := q.f.Write(q.message(nfqnlMsgVerdictBat, 0, nlAttr(nfqaVerdictHdr, v))); err != nil {
		select {
		case <-q.done:
		default:
			q.fail(err)
		}
		return false
	}
	return true
}
