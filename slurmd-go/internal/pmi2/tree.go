package pmi2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Tree commands (tree.h enum, in tree_cmd_handlers order).
const (
	TreeKVSFence     uint16 = 0
	TreeKVSFenceResp uint16 = 1
	TreeSpawn        uint16 = 2
	TreeSpawnResp    uint16 = 3
	TreeNamePublish  uint16 = 4
	TreeNameUnpub    uint16 = 5
	TreeNameLookup   uint16 = 6
	TreeRing         uint16 = 7
	TreeRingResp     uint16 = 8
	treeCmdCount     uint16 = 9
)

var treeCmdNames = [...]string{
	"TREE_CMD_KVS_FENCE", "TREE_CMD_KVS_FENCE_RESP", "TREE_CMD_SPAWN", "TREE_CMD_SPAWN_RESP",
	"TREE_CMD_NAME_PUBLISH", "TREE_CMD_NAME_UNPUBLISH", "TREE_CMD_NAME_LOOKUP", "TREE_CMD_RING",
	"TREE_CMD_RING_RESP",
}

// MaxTreeMsg bounds one tree message: a fence carries every rank's
// business cards (MPICH: about 400 bytes per rank).
const MaxTreeMsg = 64 << 20

// ErrBadTreeMsg marks a tree message that does not parse.
var ErrBadTreeMsg = errors.New("pmi2: bad tree message")

// ReverseTree is reverse_tree_info (src/common/reverse_tree.c): the parent
// and child count of rank in a tree of numNodes ranks of the given width,
// rank 0 being the root. parent is -1 for the root and when the tree is
// flat (width > numNodes).
func ReverseTree(rank, numNodes, width int) (parent, children int) {
	if rank >= numNodes {
		return -1, -1
	}
	if width > numNodes {
		return -1, 0
	}
	maxDepth := treeDepth(numNodes, width)
	if rank == 0 {
		return -1, numNodes - 1
	}
	maxChildren := geometricSeries(width, maxDepth)
	p, c := searchTree(rank, 0, maxChildren, width)
	if rank+c >= numNodes {
		c = numNodes - rank - 1
	}
	return p, c
}

func intPow(n, p int) int {
	r := 1
	for i := 0; i < p; i++ {
		r *= n
	}
	return r
}

func geometricSeries(width, depth int) int {
	if width == 1 {
		return depth + 1
	}
	return (1 - intPow(width, depth+1)) / (1 - width)
}

func treeDepth(total, width int) int {
	x, i := 0, 1
	for ; x < total-1; i++ {
		x += intPow(width, i)
	}
	return i - 1
}

func searchTree(id, node, maxChildren, width int) (parent, nextMax int) {
	current := node + 1
	next := maxChildren/width - 1
	if id == current {
		return node, next
	}
	for i := 1; i <= width; i++ {
		n := current + next + 1
		if id == n {
			return node, next
		}
		if id > current && id < n {
			return searchTree(id, current, next, width)
		}
		current = n
	}
	return -1, -1
}

// StepdParent is the tree position of node nodeID of a step of nnodes:
// srun is the root (id 0), node i is id i+1 (setup.c
// _setup_stepd_tree_info). parent is the parent's node id, -1 for srun;
// children counts every step manager below this one (the fence waits for
// each).
func StepdParent(nodeID, nnodes, width int) (parent, children int) {
	p, c := ReverseTree(nodeID+1, nnodes+1, width)
	if p <= 0 {
		return -1, c
	}
	return p - 1, c
}

// ReadTreeMsg reads one tree message as handle_tree_cmd does: u32 length
// (network order), u16 command, length-2 bytes. fromSlurmd: the message
// came through REQUEST_FORWARD_DATA, which puts the sender's uid first.
func ReadTreeMsg(r io.Reader, fromSlurmd bool) (uid uint32, cmd uint16, body []byte, err error) {
	var b [4]byte
	if fromSlurmd {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, 0, nil, fmt.Errorf("%w: uid: %w", ErrBadTreeMsg, err)
		}
		uid = binary.BigEndian.Uint32(b[:])
	}
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return uid, 0, nil, fmt.Errorf("%w: length: %w", ErrBadTreeMsg, err)
	}
	n := binary.BigEndian.Uint32(b[:])
	if n < 2 || n > MaxTreeMsg {
		return uid, 0, nil, fmt.Errorf("%w: length %d", ErrBadTreeMsg, n)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return uid, 0, nil, fmt.Errorf("%w: %d bytes: %w", ErrBadTreeMsg, n, err)
	}
	cmd = binary.BigEndian.Uint16(msg)
	if cmd >= treeCmdCount {
		return uid, cmd, nil, fmt.Errorf("%w: invalid tree req command %d", ErrBadTreeMsg, cmd)
	}
	return uid, cmd, msg[2:], nil
}

// TreeCmdName names a tree command as stock's debug lines do.
func TreeCmdName(cmd uint16) string {
	if int(cmd) < len(treeCmdNames) {
		return treeCmdNames[cmd]
	}
	return fmt.Sprintf("TREE_CMD_%d", cmd)
}

// Fence is a TREE_CMD_KVS_FENCE: a stepd's fence with its subtree's pairs.
type Fence struct {
	FromNodeID  uint32
	FromNode    string
	NumChildren uint32 // nodes the message stands for (its sender included)
	Seq         uint32
	Pairs       []byte // packstr key, packstr value, ...
}

// AppendFence packs the header of a fence message (temp_kvs_init): cmd,
// from node id, from node name, node count, seq.
func appendFenceHeader(nodeID uint32, node string, numChildren, seq uint32) []byte {
	p := slurmproto.NewPacker(64)
	p.U16(TreeKVSFence)
	p.U32(nodeID)
	p.Str(node)
	p.U32(numChildren)
	p.U32(seq)
	return p.Bytes()
}

// ParseFence unpacks a KVS_FENCE body (after the command).
func ParseFence(b []byte) (*Fence, error) {
	u := slurmproto.NewUnpacker(b)
	f := &Fence{}
	f.FromNodeID, _ = u.U32()
	f.FromNode, _ = u.Str()
	f.NumChildren, _ = u.U32()
	f.Seq, _ = u.U32()
	if err := u.Err(); err != nil {
		return nil, fmt.Errorf("%w: kvs fence: %w", ErrBadTreeMsg, err)
	}
	f.Pairs = b[u.Offset():]
	if _, err := parsePairs(f.Pairs); err != nil {
		return nil, err
	}
	return f, nil
}

// FenceResp packs a TREE_CMD_KVS_FENCE_RESP as srun sends it: cmd, seq,
// then the pairs.
func FenceResp(seq uint32, pairs [][2]string) []byte {
	p := slurmproto.NewPacker(64)
	p.U16(TreeKVSFenceResp)
	p.U32(seq)
	for _, kv := range pairs {
		packKV(p, kv[0], kv[1])
	}
	return p.Bytes()
}

func packKV(p *slurmproto.Packer, k, v string) {
	p.Str(cStr(k))
	p.Str(cStr(v))
}

// cStr maps Go "" to a C empty string (packstr("") is u32 1 + NUL; the
// codec's "" is NULL).
func cStr(s string) string {
	if s == "" {
		return slurmproto.EmptyString
	}
	return s
}

func goStr(s string) string {
	if s == slurmproto.EmptyString {
		return ""
	}
	return s
}

// parsePairs reads packstr key/value pairs to the end of b.
func parsePairs(b []byte) ([][2]string, error) {
	u := slurmproto.NewUnpacker(b)
	var out [][2]string
	for u.Remaining() > 0 {
		k, _ := u.Str()
		v, _ := u.Str()
		if err := u.Err(); err != nil {
			return nil, fmt.Errorf("%w: kvs pairs: %w", ErrBadTreeMsg, err)
		}
		out = append(out, [2]string{goStr(k), goStr(v)})
	}
	return out, nil
}
