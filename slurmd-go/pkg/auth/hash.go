package auth

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cloudflare/circl/xof/k12"
)

// HashKind is the first byte of the munge payload of an RPC (Slurm's
// hash_plugin_type). The values are on the wire.
type HashKind uint8

const (
	// HashDefault is what a reply should use when the request carried no
	// hash at all (empty payload): Slurm's HASH_PLUGIN_DEFAULT, i.e. K12.
	HashDefault HashKind = 0
	// HashNone: payload = 0x01 || msg_type (3 bytes).
	HashNone HashKind = 1
	// HashK12: payload = 0x02 || K12(body, custom=BE16(msg_type)) (33 bytes).
	HashK12 HashKind = 2
)

// K12Size is the length of the K12 digest Slurm carries.
const K12Size = 32

// version2108 is SLURM_21_08_PROTOCOL_VERSION; headers at or below it use
// the old payload (msg_type in host order, never K12 on send).
const version2108 = 0x2500

// HashPolicy is the receive-side policy from CommunicationParameters.
type HashPolicy struct {
	BlockNullHash bool // block_null_hash: refuse an empty payload
	BlockZeroHash bool // block_zero_hash: refuse a HashNone payload
}

func (k HashKind) String() string {
	switch k {
	case HashDefault:
		return "default"
	case HashNone:
		return "none"
	case HashK12:
		return "k12"
	}
	return fmt.Sprintf("HashKind(%d)", uint8(k))
}

// Payload returns the munge payload Slurm 22.05 puts in the auth credential
// of a message with this header version, type and packed body.
//
// For 21.08 and older peers it is always 0x01 || msg_type in host byte
// order: 21.08.8/20.11.9 did not normalise it, and Slurm only runs between
// little-endian peers here, so little-endian it is. Otherwise HashNone gives
// 0x01 || BE16(type), and HashK12 or HashDefault the K12 digest. Any other
// kind is treated as the default, as hash_g_compute would refuse it.
func Payload(version uint16, msgType uint16, body []byte, kind HashKind) []byte {
	return AppendPayload(make([]byte, 0, 1+K12Size), version, msgType, body, kind)
}

// AppendPayload is Payload appending to dst (no allocation with room for 33
// bytes).
func AppendPayload(dst []byte, version uint16, msgType uint16, body []byte, kind HashKind) []byte {
	if version <= version2108 {
		return binary.LittleEndian.AppendUint16(append(dst, byte(HashNone)), msgType)
	}
	if kind == HashNone {
		return binary.BigEndian.AppendUint16(append(dst, byte(HashNone)), msgType)
	}
	var sum [K12Size]byte
	k12Sum(&sum, msgType, body)
	dst = append(dst, byte(HashK12))
	return append(dst, sum[:]...)
}

func k12Sum(sum *[K12Size]byte, msgType uint16, body []byte) {
	var custom [2]byte
	binary.BigEndian.PutUint16(custom[:], msgType)
	k12.Draft10Sum(sum[:], body, custom[:])
}

// CheckPayload verifies the munge payload of a received message against the
// exact body bytes (header body_length of them), like _check_hash in
// slurm_protocol_api.c. It returns the kind seen, which the reply mirrors:
// HashNone if the request used none, HashDefault if it had no payload.
//
// Errors wrap ErrHashMissing (empty payload under block_null_hash) or
// ErrHashMismatch (anything else). Slurm accepts, and so do we:
//   - an empty payload unless BlockNullHash;
//   - 0x01 || BE16(type), and for <=21.08 headers also 0x01 || LE16(type),
//     unless BlockZeroHash;
//   - 0x02 (or 0x00, which Slurm maps to its default plugin, K12) followed
//     by the 32-byte K12 digest, at any header version.
func CheckPayload(version uint16, msgType uint16, body []byte, payload []byte, p HashPolicy) (HashKind, error) {
	if len(payload) == 0 {
		if p.BlockNullHash {
			return 0, fmt.Errorf("%w: empty munge payload refused (block_null_hash)", ErrHashMissing)
		}
		return HashDefault, nil
	}
	switch HashKind(payload[0]) {
	case HashNone:
		if p.BlockZeroHash {
			return 0, fmt.Errorf("%w: none hash refused (block_zero_hash)", ErrHashMismatch)
		}
		if len(payload) != 3 {
			return 0, fmt.Errorf("%w: none hash of %d bytes, want 3", ErrHashMismatch, len(payload))
		}
		if binary.BigEndian.Uint16(payload[1:]) == msgType {
			return HashNone, nil
		}
		if version <= version2108 && binary.LittleEndian.Uint16(payload[1:]) == msgType {
			return HashNone, nil
		}
		return 0, fmt.Errorf("%w: none hash names msg_type %#04x, message is %d",
			ErrHashMismatch, payload[1:], msgType)
	case HashDefault, HashK12:
		if len(payload) != 1+K12Size {
			return 0, fmt.Errorf("%w: k12 hash of %d bytes, want %d", ErrHashMismatch, len(payload), 1+K12Size)
		}
		var sum [K12Size]byte
		k12Sum(&sum, msgType, body)
		if !bytes.Equal(sum[:], payload[1:]) {
			return 0, fmt.Errorf("%w: k12 digest differs for msg_type %d, %d body bytes",
				ErrHashMismatch, msgType, len(body))
		}
		return HashK12, nil
	default:
		return 0, fmt.Errorf("%w: unknown hash type %d", ErrHashMismatch, payload[0])
	}
}
