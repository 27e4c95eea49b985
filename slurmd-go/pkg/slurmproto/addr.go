package slurmproto

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Address families as packed in slurm_addr_t (Linux values).
const (
	AFUnspec uint16 = 0
	AFInet   uint16 = 2
	AFInet6  uint16 = 10
)

// Addr is a packed slurm_addr_t (sockaddr_storage). The zero value is
// AF_UNSPEC, which packs as just u16 0.
//
// Wire quirk (slurm_pack_addr): IPv4 packs pack32(sin_addr.s_addr) and
// pack16(sin_port) on values that are already in network order, so on the
// little-endian hosts Slurm runs on the 4 address octets appear reversed and
// the port little-endian: 127.0.0.1:49250 → 0002 0100007f 62c0. IPv6 packs
// the 16 address bytes with packmem (not swapped) and the port the same
// swapped way. This codec reproduces the x86 form regardless of the host.
type Addr struct {
	// AddrPort is valid for AF_INET and AF_INET6.
	AddrPort netip.AddrPort
	// Family is only consulted when AddrPort is invalid: 0 packs AF_UNSPEC;
	// any other value (an unknown family seen on the wire) packs just that
	// u16, so it re-encodes unchanged. Decoding sets it for every family.
	Family uint16
}

// AddrFrom returns an Addr for ap (an unmapped IPv4 address packs as AF_INET).
func AddrFrom(ap netip.AddrPort) Addr {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	a := Addr{AddrPort: ap, Family: AFInet6}
	if ap.Addr().Is4() {
		a.Family = AFInet
	}
	return a
}

// IsUnspec reports whether a carries no address (AF_UNSPEC or unknown family).
func (a Addr) IsUnspec() bool { return !a.AddrPort.IsValid() }

// String formats the address like netip.AddrPort, or "unspec".
func (a Addr) String() string {
	if a.IsUnspec() {
		if a.Family != 0 {
			return fmt.Sprintf("family(%d)", a.Family)
		}
		return "unspec"
	}
	return a.AddrPort.String()
}

func (a Addr) pack(p *Packer) {
	if !a.AddrPort.IsValid() {
		p.U16(a.Family)
		return
	}
	ip := a.AddrPort.Addr()
	var port [2]byte
	binary.LittleEndian.PutUint16(port[:], a.AddrPort.Port())
	if ip.Is4() {
		p.U16(AFInet)
		b := ip.As4()
		p.Raw([]byte{b[3], b[2], b[1], b[0]})
		p.Raw(port[:])
		return
	}
	p.U16(AFInet6)
	b := ip.As16()
	p.Mem(b[:])
	p.Raw(port[:])
}

func unpackAddr(u *Unpacker) (Addr, error) {
	fam, err := u.U16()
	if err != nil {
		return Addr{}, err
	}
	switch fam {
	case AFInet:
		b, _ := u.Raw(4)
		pb, err := u.Raw(2)
		if err != nil {
			return Addr{}, err
		}
		ip := netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]})
		return Addr{AddrPort: netip.AddrPortFrom(ip, binary.LittleEndian.Uint16(pb)), Family: AFInet}, nil
	case AFInet6:
		n, err := u.U32()
		if err != nil {
			return Addr{}, err
		}
		if n != 16 {
			return Addr{}, u.Fail(fmt.Errorf("%w: IPv6 address length %d", ErrMalformed, n))
		}
		b, _ := u.Raw(16)
		pb, err := u.Raw(2)
		if err != nil {
			return Addr{}, err
		}
		ip := netip.AddrFrom16([16]byte(b))
		return Addr{AddrPort: netip.AddrPortFrom(ip, binary.LittleEndian.Uint16(pb)), Family: AFInet6}, nil
	default:
		// Slurm zeroes the address for other families; keep the number so
		// the header re-encodes byte-identically.
		return Addr{Family: fam}, nil
	}
}
