package slurmproto

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sampleBodies has one populated value per registered body type; it drives
// the round-trip test and seeds FuzzDecodeBody.
func sampleBodies() []Body {
	e := Energy{BaseConsumed: 1, AveWatts: 2, Consumed: 3, CurrentWatts: 4, PreviousConsumed: 5, PollTime: time.Unix(1700000000, 0)}
	return []Body{
		&EmptyBody{Type: RequestPing},
		&EmptyBody{Type: ResponseForwardFailed},
		&ReturnCode{RC: ESlurmdKillJobAlreadyComplete},
		&ReturnCodeMsg{RC: ESlurmdInvalidJobCredential, Msg: "bad cred"},
		&PingSlurmdResponse{CPULoad: 12, FreeMem: 3456},
		&NodeRegistrationStatus{
			Timestamp: time.Unix(1700000001, 0), SlurmdStartTime: time.Unix(1700000000, 0),
			Status: ESlurmdPrologFailed, FeaturesActive: "a", FeaturesAvail: EmptyString, Hostname: "vm",
			NodeName: "n1", Arch: "x86_64", CPUSpecList: "0-1", OS: "Linux", CPUs: 8, Boards: 1, Sockets: 2,
			Cores: 4, Threads: 1, RealMemory: 1 << 40, TmpDisk: 100, UpTime: 5, HashVal: NoVal, CPULoad: 1,
			FreeMem: 2, Steps: []StepID{{JobID: 1, StepID: StepIDBatch, StepHetComp: NoVal}, {JobID: 2, StepHetComp: NoVal}}, Flags: RegFlagResp,
			GresInfo: []byte{0x26, 0, 0, 0}, Energy: e, Version: "22.05.8", DynamicType: DynNodeNorm,
			DynamicConf: "NodeName=n1 CPUs=8", DynamicFeature: "f",
		},
		&NodeRegistrationResponse{TRES: []TRESRec{{ID: 1, Type: "cpu", Count: 4}, {ID: 6, Type: "fs", Name: "disk"}}, NodeName: "n9"},
		&NodeRegistrationResponse{},
		&NodeRegistrationResponse{TRES: []TRESRec{}},
		&SlurmdStatus{Booted: time.Unix(1700000000, 0), SlurmdDebug: 3, CPUs: 2, RealMem: 100, PID: 42,
			Hostname: "h", Logfile: "/l", StepList: "NONE", Version: "22.05.8"},
		&AcctGatherEnergy{Type: ResponseAcctGatherUpdate, NodeName: "n1", Sensors: []Energy{e}},
		&AcctGatherEnergy{Type: ResponseAcctGatherEnergy, NodeName: "n1", Sensors: []Energy{e, {}}},
		&AcctGatherEnergyRequest{ContextID: 3, Delta: 30},
		&ShutdownRequest{Options: 1},
		&RebootNodesRequest{Features: "f", Flags: 1, NextState: NoVal, NodeList: "n[1-2]", Reason: "r"},
		&EpilogComplete{JobID: 2, RC: 0, NodeName: "n2"},
		&StepIDMsg{Type: RequestJobStepPids, StepID: StepID{JobID: 5, StepID: 0, StepHetComp: NoVal}},
		&JobStepPidsResponse{NodeName: "n3", PIDs: []uint32{100, 101}},
		&JobStepStatResponse{NumTasks: 1, Pids: JobStepPidsResponse{NodeName: "n3", PIDs: []uint32{26385}}},
		&JobStepStatResponse{RC: 1, JobAcct: &JobAcct{UserCPUSec: 1, SysCPUSec: 2, ActCPUFreq: 3, ConsumedEnergy: 4,
			TRESIDs: []uint32{1, 2}, TRESList: []TRESRec{{ID: 1, Type: "cpu"}},
			Usage: [14][]uint64{{1, 2}, {3, 4}, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, {5, 6}}}},
		&ReattachTasksResponse{NodeName: "n3", RC: 0, GTIDs: []uint32{0, 1}, LocalPIDs: []uint32{10, 11}, Executables: []string{"/bin/a", ""}},
		&ReattachTasksResponse{NodeName: "n3", RC: ESlurmdJobNotRunning},
	}
}

func TestBody_RoundTrip(t *testing.T) {
	for _, v := range []uint16{Version2011, Version2108, Version2205} {
		for _, b := range sampleBodies() {
			t.Run(b.MsgType().String(), func(t *testing.T) {
				enc, err := EncodeBody(v, b)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := DecodeBody(v, b.MsgType(), enc)
				if err != nil {
					t.Fatal(err)
				}
				want := b
				if v < Version2205 {
					// Fields that the old registration layout lacks.
					if r, ok := b.(*NodeRegistrationStatus); ok {
						c := *r
						c.Hostname, c.DynamicConf = "", ""
						want = &c
					}
				}
				if !reflect.DeepEqual(normalize(dec), normalize(want)) {
					t.Fatalf("v%04x:\n got %+v\nwant %+v", v, dec, want)
				}
				// Value receivers encode the same as pointers.
				enc2, err := EncodeBody(v, reflect.ValueOf(b).Elem().Interface().(Body))
				if err != nil || !bytes.Equal(enc, enc2) {
					t.Fatalf("value encode differs: %v", err)
				}
				// A prefix decode reports exactly the body length.
				_, n, err := DecodeBodyPrefix(v, b.MsgType(), append(enc, 0xee, 0xff))
				if err != nil || n != len(enc) {
					t.Fatalf("prefix decode: n=%d len=%d err=%v", n, len(enc), err)
				}
				// Every strict prefix is an error, never a panic.
				for i := 0; i < len(enc); i++ {
					if _, err := DecodeBody(v, b.MsgType(), enc[:i]); err == nil {
						t.Fatalf("truncated to %d bytes decoded", i)
					}
				}
			})
		}
	}
}

// normalize maps times to Unix seconds so DeepEqual ignores the location.
func normalize(b Body) any {
	switch m := b.(type) {
	case *NodeRegistrationStatus:
		c := *m
		c.Timestamp, c.SlurmdStartTime = unixOnly(c.Timestamp), unixOnly(c.SlurmdStartTime)
		c.Energy.PollTime = unixOnly(c.Energy.PollTime)
		return c
	case *SlurmdStatus:
		c := *m
		c.Booted, c.LastSlurmctldMsg = unixOnly(c.Booted), unixOnly(c.LastSlurmctldMsg)
		return c
	case *AcctGatherEnergy:
		c := *m
		c.Sensors = append([]Energy(nil), m.Sensors...)
		for i := range c.Sensors {
			c.Sensors[i].PollTime = unixOnly(c.Sensors[i].PollTime)
		}
		return c
	}
	return b
}

func unixOnly(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(t.Unix(), 0).UTC()
}

func TestBody_RegistrationOldLayout(t *testing.T) {
	r := NodeRegistrationStatus{NodeName: "n1", Hostname: "dropped", DynamicType: 1, DynamicConf: "dropped", DynamicFeature: "f"}
	new, _ := EncodeBody(Version2205, r)
	old, _ := EncodeBody(Version2108, r)
	// 22.05 adds str hostname (4+8) and str dynamic_conf (4+8).
	if len(new)-len(old) != 24 {
		t.Fatalf("layout sizes %d vs %d", len(new), len(old))
	}
}

func TestBody_Errors(t *testing.T) {
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"reattach length mismatch", func() error {
			_, err := EncodeBody(Version2205, ReattachTasksResponse{GTIDs: []uint32{1}})
			return err
		}, ErrMalformed},
		{"reattach ntasks mismatch", func() error {
			_, err := DecodeBody(Version2205, ResponseReattachTasks, mustHexT("00000000 00000000 00000002 00000001 00000000 00000001 00000000"))
			return err
		}, ErrMalformed},
		{"gres size mismatch", func() error {
			b, _ := EncodeBody(Version2205, NodeRegistrationStatus{GresInfo: []byte{1, 2, 3, 4}})
			// gres_info_size is the u32 before packmem's own length.
			i := bytes.Index(b, []byte{0, 0, 0, 4, 0, 0, 0, 4, 1, 2, 3, 4})
			b[i+3] = 3
			_, err := DecodeBody(Version2205, MessageNodeRegistrationStatus, b)
			return err
		}, ErrMalformed},
		{"registration step count huge", func() error {
			b, _ := EncodeBody(Version2205, NodeRegistrationStatus{})
			// job_count follows 2 times, u32, 7 NULL strings, 5 u16, u64, 4 u32, u64.
			off := 8 + 8 + 4 + 7*4 + 5*2 + 8 + 4*4 + 8
			binary.BigEndian.PutUint32(b[off:], NoVal)
			_, err := DecodeBody(Version2205, MessageNodeRegistrationStatus, b)
			return err
		}, ErrTooLarge},
		{"trailing bytes", func() error {
			_, err := DecodeBody(Version2205, ResponseSlurmRC, []byte{0, 0, 0, 0, 1})
			return err
		}, ErrMalformed},
		{"wrong Go type", func() error {
			c, _ := lookup(Version2205, ResponseSlurmRC)
			return c.Encode(NewPacker(0), Version2205, PingSlurmdResponse{})
		}, ErrMalformed},
		{"too many sensors", func() error {
			_, err := EncodeBody(Version2205, AcctGatherEnergy{Sensors: make([]Energy, 70000)})
			return err
		}, ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func mustHexT(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func TestRegisterBody_Overlap(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("overlapping registration did not panic")
		}
	}()
	RegisterBody(ResponseSlurmRC, Codec{Versions: []uint16{Version2205},
		Encode: func(*Packer, uint16, Body) error { return nil },
		Decode: func(*Unpacker, uint16, MsgType) (Body, error) { return nil, nil }})
}

func TestReadFrame(t *testing.T) {
	frame := readGolden(t, "req_ping_v2600.bin")
	big := make([]byte, 4+200000)
	binary.BigEndian.PutUint32(big, 200000)
	tests := []struct {
		name string
		in   []byte
		max  uint32
		want error
		n    int
	}{
		{"golden", frame, 1 << 20, nil, len(frame) - 4},
		{"large frame", big, MaxMessageSize, nil, 200000},
		{"over max", frame, 100, ErrTooLarge, 0},
		{"over 1GiB", []byte{0x40, 0, 0, 1}, 0, ErrTooLarge, 0},
		{"short length", []byte{0, 0}, 0, io.ErrUnexpectedEOF, 0},
		{"empty", nil, 0, io.EOF, 0},
		{"truncated", frame[:100], 0, io.ErrUnexpectedEOF, 0},
		{"truncated large", big[:1000], 0, io.ErrUnexpectedEOF, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tc.in), tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err == nil && len(got) != tc.n {
				t.Fatalf("len %d", len(got))
			}
		})
	}
}

func TestReadFrame_HugeLengthNoAlloc(t *testing.T) {
	in := []byte{0x3f, 0xff, 0xff, 0xff, 1, 2, 3} // claims ~1 GiB, sends 3 bytes
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := ReadFrame(bytes.NewReader(in), MaxMessageSize); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v", err)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("allocated %d bytes for a 3-byte body", d)
	}
}

func TestEncodeMessage_SetsBodyLength(t *testing.T) {
	body, _ := EncodeBody(Version2205, PingSlurmdResponse{CPULoad: 1, FreeMem: 2})
	h := Header{Version: Version2205, MsgType: ResponsePingSlurmd, BodyLength: 999}
	frame := EncodeMessage(h, AuthBlock{PluginID: AuthPluginMunge, Cred: "MUNGE:x:"}, body)
	if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		t.Fatal("length prefix")
	}
	m, err := DecodeMessage(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.BodyLength != 12 || !bytes.Equal(m.Body, body) || m.Auth.Cred != "MUNGE:x:" {
		t.Fatalf("%+v", m)
	}
	// 22.05 header with no forward, no ret_list, AF_UNSPEC is 16 bytes.
	if got := len(EncodeHeader(Header{Version: Version2205})); got != 16 {
		t.Fatalf("22.05 header %d bytes", got)
	}
	if got := len(EncodeHeader(Header{Version: Version2011})); got != 18 {
		t.Fatalf("20.11 header %d bytes", got)
	}
}

func TestDecodeMessage_OtherAuthPlugin(t *testing.T) {
	frame := EncodeMessage(Header{Version: Version2205, MsgType: RequestPing},
		AuthBlock{PluginID: AuthPluginJWT, Raw: []byte{0, 0, 0, 2, 'x', 0}}, nil)
	m, err := DecodeMessage(frame[4:])
	if err != nil || m.Auth.PluginID != AuthPluginJWT || len(m.Auth.Raw) != 6 {
		t.Fatalf("%v %+v", err, m.Auth)
	}
	if re := EncodeMessage(m.Header, m.Auth, m.Body); !bytes.Equal(re, frame) {
		t.Fatal("re-encode differs")
	}
}

func TestRetEntryHelpers(t *testing.T) {
	e := NewRetEntry("n2", 0, ResponseSlurmRCMsg, []byte{0, 0, 0x0f, 0xa2, 0, 0, 0, 1, 0})
	if e.MsgType != ResponseSlurmRC || len(e.Body) != 4 || e.NodeName != "n2" {
		t.Fatalf("%+v", e)
	}
	f := ForwardFailed("n3", SlurmCommunicationsConnectionError)
	h := Header{Version: Version2205, MsgType: ResponseSlurmRC, RetList: []RetEntry{e, f}}
	frame := EncodeMessage(h, AuthBlock{PluginID: AuthPluginMunge, Cred: "MUNGE:x:"}, []byte{0, 0, 0, 0})
	m, err := DecodeMessage(frame[4:])
	if err != nil || len(m.Header.RetList) != 2 {
		t.Fatalf("%v %+v", err, m)
	}
	g := m.Header.RetList[1]
	if g.MsgType != ResponseForwardFailed || g.Err != SlurmCommunicationsConnectionError || g.NodeName != "n3" || len(g.Body) != 0 {
		t.Fatalf("%+v", g)
	}
}
