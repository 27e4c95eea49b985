package slurmproto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPacker_Primitives(t *testing.T) {
	tests := []struct {
		name string
		pack func(p *Packer)
		want string
	}{
		{"u8", func(p *Packer) { p.U8(0xab) }, "ab"},
		{"bool true", func(p *Packer) { p.Bool(true) }, "01"},
		{"bool false", func(p *Packer) { p.Bool(false) }, "00"},
		{"u16", func(p *Packer) { p.U16(0x2600) }, "2600"},
		{"u32", func(p *Packer) { p.U32(NoVal) }, "fffffffe"},
		{"u64", func(p *Packer) { p.U64(NoVal64) }, "fffffffffffffffe"},
		{"time", func(p *Packer) { p.Time(time.Unix(0x6b0c4ec9, 0)) }, "000000006b0c4ec9"},
		{"zero time", func(p *Packer) { p.Time(time.Time{}) }, "0000000000000000"},
		{"negative time", func(p *Packer) { p.TimeUnix(-1) }, "ffffffffffffffff"},
		{"double 1.5", func(p *Packer) { p.Double(1.5) }, "4136e36000000000"}, // bits of 1.5e6
		{"NULL string", func(p *Packer) { p.Str("") }, "00000000"},
		{"empty string", func(p *Packer) { p.Str(EmptyString) }, "00000001 00"},
		{"string", func(p *Packer) { p.Str("g1") }, "00000003 673100"},
		{"mem", func(p *Packer) { p.Mem([]byte{1, 2}) }, "00000002 0102"},
		{"nil mem", func(p *Packer) { p.Mem(nil) }, "00000000"},
		{"string array", func(p *Packer) { p.StrArray([]string{"a", "", EmptyString}) }, "00000003 00000002 6100 00000000 00000001 00"},
		{"nil string array", func(p *Packer) { p.StrArray(nil) }, "00000000"},
		{"u16 array", func(p *Packer) { p.U16Array([]uint16{1, 2}) }, "00000002 0001 0002"},
		{"u32 array", func(p *Packer) { p.U32Array([]uint32{7}) }, "00000001 00000007"},
		{"u64 array", func(p *Packer) { p.U64Array([]uint64{7}) }, "00000001 0000000000000007"},
		{"nil list", func(p *Packer) { p.ListLen(true, 0) }, "fffffffe"},
		{"empty list", func(p *Packer) { p.ListLen(false, 0) }, "00000000"},
		{"nil bitmap", func(p *Packer) { p.Bitmap(nil) }, "fffffffe"},
		{"bitmap 2 bits bit0", func(p *Packer) { b := NewBitmap(2); b.Set(0); p.Bitmap(b) }, "00000002 00000004 30783100"},
		{"bitmap 0 bits", func(p *Packer) { p.Bitmap(NewBitmap(0)) }, "00000000 00000004 30783000"},
		{"step id 22.05", func(p *Packer) { p.StepID(Version2205, StepID{JobID: 3, StepID: 0, StepHetComp: NoVal, SLUID: 9}) }, "00000003 00000000 fffffffe"},
		{"step id 24.11", func(p *Packer) { p.StepID(Version2411, StepID{JobID: 3, StepID: 0, StepHetComp: NoVal}) }, "0000000000000000 00000003 00000000 fffffffe"},
		{"step id 26.05", func(p *Packer) {
			p.StepID(Version2605, StepID{JobID: 3, StepID: 0, StepHetComp: NoVal, SLUID: 0x2ab688c1ce287400})
		}, "2ab688c1ce287400 00000003 00000000 fffffffe"},
		{"addr ipv4", func(p *Packer) { p.Addr(AddrFrom(netip.MustParseAddrPort("127.0.0.1:49250"))) }, "0002 0100007f 62c0"},
		{"addr unspec", func(p *Packer) { p.Addr(Addr{}) }, "0000"},
		{"addr unknown family", func(p *Packer) { p.Addr(Addr{Family: 1}) }, "0001"},
		{"addr ipv6", func(p *Packer) { p.Addr(AddrFrom(netip.MustParseAddrPort("[::1]:49250"))) },
			"000a 00000010 00000000000000000000000000000001 62c0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPacker(0)
			tc.pack(p)
			if want := mustHex(t, tc.want); !bytes.Equal(p.Bytes(), want) {
				t.Fatalf("packed %x, want %x", p.Bytes(), want)
			}
		})
	}
}

func TestUnpacker_RoundTrip(t *testing.T) {
	p := NewPacker(0)
	p.U8(1)
	p.Bool(true)
	p.U16(2)
	p.U32(3)
	p.U64(4)
	p.Time(time.Unix(1700000000, 0))
	p.Time(time.Time{})
	p.Double(0.25)
	p.Str("")
	p.Str(EmptyString)
	p.Str("abc")
	p.StrArray([]string{"x", "", EmptyString})
	p.U16Array([]uint16{5, 6})
	p.U32Array([]uint32{7})
	p.U64Array(nil)
	p.Mem([]byte("raw"))
	b := NewBitmap(70)
	b.Set(0)
	b.Set(69)
	p.Bitmap(b)
	p.Bitmap(nil)
	ap := netip.MustParseAddrPort("10.1.2.3:6818")
	p.Addr(AddrFrom(ap))
	p.Addr(Addr{})

	u := NewUnpacker(p.Bytes())
	check := func(name string, got, want any) {
		t.Helper()
		if !equalAny(got, want) {
			t.Errorf("%s: got %#v, want %#v", name, got, want)
		}
	}
	v8, _ := u.U8()
	check("u8", v8, uint8(1))
	vb, _ := u.Bool()
	check("bool", vb, true)
	v16, _ := u.U16()
	check("u16", v16, uint16(2))
	v32, _ := u.U32()
	check("u32", v32, uint32(3))
	v64, _ := u.U64()
	check("u64", v64, uint64(4))
	tm, _ := u.Time()
	check("time", tm.Unix(), int64(1700000000))
	tz, _ := u.Time()
	check("zero time", tz.IsZero(), true)
	d, _ := u.Double()
	check("double", d, 0.25)
	s1, _ := u.Str()
	check("NULL", s1, "")
	s2, _ := u.Str()
	check("empty", s2, EmptyString)
	s3, _ := u.Str()
	check("str", s3, "abc")
	sa, _ := u.StrArray()
	check("strarray", strings.Join(sa, ","), "x,,\x00")
	a16, _ := u.U16Array()
	check("u16 array", len(a16) == 2 && a16[0] == 5 && a16[1] == 6, true)
	a32, _ := u.U32Array()
	check("u32 array", len(a32) == 1 && a32[0] == 7, true)
	a64, _ := u.U64Array()
	check("nil u64 array", a64 == nil, true)
	m, _ := u.Mem()
	check("mem", string(m), "raw")
	bm, _ := u.Bitmap()
	check("bitmap", bm.HexMask(), "0x200000000000000001")
	check("bitmap bits", bm.Test(0) && bm.Test(69) && !bm.Test(1) && bm.Count() == 2, true)
	nb, _ := u.Bitmap()
	check("nil bitmap", nb == nil, true)
	a, _ := u.Addr()
	check("addr", a.AddrPort, ap)
	ua, _ := u.Addr()
	check("unspec", ua.IsUnspec(), true)
	if err := u.Done(); err != nil {
		t.Fatal(err)
	}
}

func equalAny(a, b any) bool {
	if fa, ok := a.(float64); ok {
		fb, _ := b.(float64)
		return math.Abs(fa-fb) < 1e-12
	}
	return a == b
}

func TestUnpacker_Malformed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		read func(u *Unpacker) error
		want error
	}{
		{"u32 short", "0000", func(u *Unpacker) error { _, err := u.U32(); return err }, ErrShortBuffer},
		{"u64 short", "00000000000000", func(u *Unpacker) error { _, err := u.U64(); return err }, ErrShortBuffer},
		{"string past end", "00000005 6162", func(u *Unpacker) error { _, err := u.Str(); return err }, ErrShortBuffer},
		{"string huge", "7fffffff 61", func(u *Unpacker) error { _, err := u.Str(); return err }, ErrTooLarge},
		{"string 1e9 with 10 left", "3b9aca00 00000000000000000000", func(u *Unpacker) error { _, err := u.Str(); return err }, ErrShortBuffer},
		{"string no NUL", "00000002 6162", func(u *Unpacker) error { _, err := u.Str(); return err }, ErrMalformed},
		{"mem huge", "ffffffff", func(u *Unpacker) error { _, err := u.Mem(); return err }, ErrTooLarge},
		{"u32 array count", "3b9aca00 0000000000000000", func(u *Unpacker) error { _, err := u.U32Array(); return err }, ErrShortBuffer},
		{"u64 array count huge", "ffffffff 00", func(u *Unpacker) error { _, err := u.U64Array(); return err }, ErrTooLarge},
		{"string array count", "3b9aca00 00000000", func(u *Unpacker) error { _, err := u.StrArray(); return err }, ErrShortBuffer},
		{"list count", "00100000 00", func(u *Unpacker) error { _, _, err := u.ListLen(28); return err }, ErrShortBuffer},
		{"bitmap too few digits", "00000040 00000004 30783100", func(u *Unpacker) error { _, err := u.Bitmap(); return err }, ErrMalformed},
		{"bitmap bit beyond size", "00000002 00000004 30783400", func(u *Unpacker) error { _, err := u.Bitmap(); return err }, ErrMalformed},
		{"bitmap bad digit", "00000004 00000004 30787a00", func(u *Unpacker) error { _, err := u.Bitmap(); return err }, ErrMalformed},
		{"ipv6 wrong length", "000a 00000004 00000000 0000", func(u *Unpacker) error { _, err := u.Addr(); return err }, ErrMalformed},
		{"ipv4 short", "0002 0100", func(u *Unpacker) error { _, err := u.Addr(); return err }, ErrShortBuffer},
		{"trailing", "00000001 ff", func(u *Unpacker) error { u.U32(); return u.Done() }, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := NewUnpacker(mustHex(t, tc.in))
			err := tc.read(u)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "slurmproto: ") {
				t.Errorf("error %q lacks package prefix", err)
			}
			// Sticky: the next read fails too.
			if _, err2 := u.U8(); err2 == nil {
				t.Errorf("error is not sticky")
			}
		})
	}
}

func TestUnpacker_NoHugeAllocation(t *testing.T) {
	// A count of 1e9 with 10 bytes left must fail before allocating.
	in := mustHex(t, "3b9aca00 00000000000000000000")
	allocs := testing.AllocsPerRun(100, func() {
		u := NewUnpacker(in)
		if _, err := u.U64Array(); err == nil {
			t.Fatal("no error")
		}
	})
	// Only the error value and its formatting allocate.
	if allocs > 10 {
		t.Fatalf("%v allocations", allocs)
	}
}

func TestBitmap_HexMask(t *testing.T) {
	tests := []struct {
		name string
		n    int
		set  []int
		want string
	}{
		{"2 bits bit0", 2, []int{0}, "0x1"},
		{"4 bits all", 4, []int{0, 1, 2, 3}, "0xF"},
		{"5 bits bit4", 5, []int{4}, "0x10"},
		{"8 bits", 8, []int{1, 7}, "0x82"},
		{"64 bits", 64, []int{63}, "0x8000000000000000"},
		{"65 bits", 65, []int{64, 0}, "0x10000000000000001"},
		{"empty", 0, nil, "0x0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBitmap(tc.n)
			for _, i := range tc.set {
				b.Set(i)
			}
			if got := b.HexMask(); got != tc.want {
				t.Fatalf("HexMask = %q, want %q", got, tc.want)
			}
			back, err := ParseHexMask(tc.n, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if back.HexMask() != tc.want || back.Count() != len(tc.set) {
				t.Fatalf("parse back = %q (%d bits set)", back.HexMask(), back.Count())
			}
		})
	}
}

func TestAddr_Decode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"ipv4 byte-swapped", "0002 0100007f 62c0", "127.0.0.1:49250"},
		{"ipv4 from golden", "0002 0100007f c8a0", "127.0.0.1:41160"},
		{"unspec", "0000", "unspec"},
		{"ipv6", "000a 00000010 fe800000000000000000000000000001 2a1a", "[fe80::1]:6698"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := mustHex(t, tc.in)
			u := NewUnpacker(in)
			a, err := u.Addr()
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != tc.want {
				t.Fatalf("got %s, want %s", a, tc.want)
			}
			p := NewPacker(0)
			p.Addr(a)
			if !bytes.Equal(p.Bytes(), in) {
				t.Fatalf("re-encoded %x, want %x", p.Bytes(), in)
			}
		})
	}
}

func TestMsgType_String(t *testing.T) {
	tests := []struct {
		t    MsgType
		want string
	}{
		{RequestPing, "REQUEST_PING"},
		{ResponsePingSlurmd, "RESPONSE_PING_SLURMD"},
		{MessageNodeRegistrationStatus, "MESSAGE_NODE_REGISTRATION_STATUS"},
		{ResponseSlurmRCMsg, "RESPONSE_SLURM_RC_MSG"},
		{ResponseForwardFailed, "RESPONSE_FORWARD_FAILED"},
		{RequestLaunchTasks, "REQUEST_LAUNCH_TASKS"},
		{MsgType(1006), "MsgType(1006)"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.t.String(); got != tc.want {
				t.Fatalf("got %q", got)
			}
		})
	}
	numbers := map[MsgType]uint16{
		RequestNodeRegistrationStatus: 1001, RequestReconfigureWithConfig: 1004, RequestShutdown: 1005,
		RequestPing: 1008, RequestHealthCheck: 1011, RequestRebootNodes: 1015, ResponsePingSlurmd: 1016,
		RequestAcctGatherUpdate: 1017, ResponseAcctGatherEnergy: 1020, ResponseNodeRegistration: 1024,
		RequestBatchJobLaunch: 4005, RequestJobStepStat: 5019, RequestDaemonStatus: 5024,
		ResponseSlurmdStatus: 5025, RequestKillJob: 5032, RequestLaunchTasks: 6001,
		RequestTerminateJob: 6011, MessageEpilogComplete: 6012, RequestCompleteProlog: 6018,
		SrunStepSignal: 7009, ResponseSlurmRC: 8001, ResponseForwardFailed: 9001,
	}
	for mt, n := range numbers {
		if uint16(mt) != n {
			t.Errorf("%v = %d, want %d", mt, uint16(mt), n)
		}
	}
}

func TestRCName(t *testing.T) {
	tests := []struct {
		rc   uint32
		want string
	}{
		{SlurmSuccess, "SLURM_SUCCESS"},
		{SlurmProtocolVersionError, "SLURM_PROTOCOL_VERSION_ERROR"},
		{ESlurmUserIDMissing, "ESLURM_USER_ID_MISSING"},
		{ESlurmdKillJobAlreadyComplete, "ESLURMD_KILL_JOB_ALREADY_COMPLETE"},
		{ESlurmAuthCredInvalid, "ESLURM_AUTH_CRED_INVALID"},
		{ESlurmProtocolIncompletePacket, "ESLURM_PROTOCOL_INCOMPLETE_PACKET"},
		{EINVAL, "EINVAL"},
		{SlurmError, "SLURM_ERROR"},
		{123456, "123456"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := RCName(tc.rc); got != tc.want {
				t.Fatalf("got %q", got)
			}
		})
	}
	values := map[uint32]uint32{
		SlurmUnexpectedMsgError: 1000, SlurmProtocolVersionError: 1005, SlurmProtocolAuthenticationError: 1007,
		ESlurmAccessDenied: 2002, ESlurmUserIDMissing: 2010, ESlurmdKillJobAlreadyComplete: 4002,
		ESlurmProtocolIncompletePacket: 5003, ESlurmAuthCredInvalid: 6000, ESlurmAuthUnpack: 6007,
		ESlurmdCredentialRevoked: 4008, ESlurmdJobNotRunning: 4027, ESlurmAlreadyDone: 2021,
	}
	for got, want := range values {
		if got != want {
			t.Errorf("constant %d, want %d", got, want)
		}
	}
}
