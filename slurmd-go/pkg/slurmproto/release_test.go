package slurmproto

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// allSamples is every sample body of the package's tests.
func allSamples() []Body {
	var all []Body
	all = append(all, sampleBodies()...)
	all = append(all, jobSampleBodies()...)
	all = append(all, fwdSampleBodies()...)
	return append(all, launchSampleBodies()...)
}

// forRelease fills the fields only release v has, so that the samples
// exercise them: a SLUID from 24.11 on, the 24.11 and 26.05 credential
// fields, the 26.05 het step task counts.
func forRelease(b Body, v uint16) Body {
	sluid := func(s StepID) StepID {
		if v >= Version2411 {
			s.SLUID = 0x2ab688c1ce287400
		}
		return s
	}
	cred := func(c *Cred) *Cred {
		if c == nil {
			return nil
		}
		w := *c
		w.Signed = nil
		w.StepID = sluid(w.StepID)
		if v >= Version2411 {
			w.JobEndTime, w.JobStartTime = time.Unix(1700003600, 0), time.Unix(1700000000, 0)
			w.JobExtra, w.JobOversubscribe, w.JobLicenses = "x", 1, "lic:1"
			w.SwitchStepInfo = []byte{0, 0, 0, 100}
		}
		if v >= Version2605 {
			w.JobExclusive, w.JobQOS = 1, "normal"
		}
		return &w
	}
	switch m := b.(type) {
	case *LaunchTasks:
		c := *m
		c.StepID, c.Cred, c.CredVersion = sluid(c.StepID), cred(c.Cred), 0
		if v >= Version2411 {
			c.CptCompactArray, c.CptCompactReps, c.Stepmgr, c.OOMKillStep = []uint16{2, 1}, []uint32{1, 1}, "n1", true
		}
		if v >= Version2605 && c.hasHetStepTaskCnts() {
			c.HetJobStepTaskCnts = make([]uint32, c.HetJobStepCnt)
			c.AllocTLSCert = "cert"
		}
		return &c
	case *BatchJobLaunch:
		c := *m
		c.Cred, c.CredVersion = cred(c.Cred), 0
		return &c
	case *LaunchProlog:
		c := *m
		c.Cred = cred(c.Cred)
		if v >= Version2605 { // the samples' lists are in the u16-count form
			c.GresJobAlloc = nil
		}
		return &c
	case *KillJob:
		c := *m
		c.StepID, c.Cred = sluid(c.StepID), cred(c.Cred)
		if v >= Version2605 {
			c.GresJobAlloc = nil
		}
		return &c
	case *ReattachTasks:
		c := *m
		c.StepID = sluid(c.StepID)
		if v >= Version2411 {
			c.Cred, c.IOKey = nil, "MUNGE:key:"
		}
		return &c
	case *TaskExit:
		c := *m
		c.StepID = sluid(c.StepID)
		return &c
	case *NodeRegistrationStatus:
		c := *m
		c.Extra, c.InstanceID, c.InstanceType = "e", "i-1", "t"
		c.MemSpecLimit, c.Parameters = 64, "p"
		c.Energy.SlurmdStartTime = time.Unix(1700000000, 0)
		return &c
	}
	return b
}

// TestRoundTrip_SpokenReleases: every sample body, at every spoken release
// it has a layout in, decodes and re-encodes to the same bytes.
func TestRoundTrip_SpokenReleases(t *testing.T) {
	for _, v := range Spoken() {
		for i, s := range allSamples() {
			if !HasBody(v, s.MsgType()) {
				continue
			}
			b := forRelease(s, v)
			t.Run(fmt.Sprintf("%s/%02d-%v", ReleaseName(v), i, b.MsgType()), func(t *testing.T) {
				enc, err := EncodeBody(v, b)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := DecodeBody(v, b.MsgType(), enc)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				re, err := EncodeBody(v, dec)
				if err != nil || !bytes.Equal(re, enc) {
					t.Fatalf("re-encode: %v\n got %x\nwant %x", err, re, enc)
				}
			})
		}
	}
}

// TestRoundTrip_ReleaseFields: the fields a release added survive its
// round trip, and are not on the wire before it.
func TestRoundTrip_ReleaseFields(t *testing.T) {
	reg := forRelease(sampleBodies()[5], Version2605).(*NodeRegistrationStatus)
	for _, v := range Spoken() {
		enc, err := EncodeBody(v, reg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeBody(v, MessageNodeRegistrationStatus, enc)
		if err != nil {
			t.Fatal(err)
		}
		g := got.(*NodeRegistrationStatus)
		has24, has26 := v >= Version2411, v >= Version2605
		if (g.Extra != "") != has24 || (g.InstanceID != "") != has24 || g.Energy.SlurmdStartTime.IsZero() == has24 ||
			(g.MemSpecLimit != 0) != has26 || (g.Parameters != "") != has26 {
			t.Errorf("%s: %+v", ReleaseName(v), g)
		}
		if has24 && g.Steps[0].SLUID != 0 {
			t.Errorf("%s: sluid %x of a sample without one", ReleaseName(v), g.Steps[0].SLUID)
		}
	}
	c := forRelease(launchSampleBodies()[0], Version2605).(*LaunchTasks).Cred
	for _, v := range []uint16{Version2411, Version2605} {
		b, err := c.PackFields(v)
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeCredFields(v, b)
		if err != nil {
			t.Fatal(err)
		}
		if d.StepID.SLUID != 0x2ab688c1ce287400 || d.JobLicenses != "lic:1" || !d.JobEndTime.Equal(c.JobEndTime) ||
			!bytes.Equal(d.SwitchStepInfo, c.SwitchStepInfo) || (d.JobQOS == "normal") != (v == Version2605) {
			t.Errorf("%s: cred %+v", ReleaseName(v), d)
		}
	}
}

// TestBodySizes pins what the reference measured on the wire for the same
// workload in 22.05, 24.11 and 26.05 (slurm-24.11-26.05.md §5): the step
// id's SLUID adds 8 bytes from 24.11; 26.05 sends step ids where 22.05 and
// 24.11 sent a job id.
func TestBodySizes(t *testing.T) {
	step := StepID{JobID: 1, StepID: 0, StepHetComp: NoVal}
	tests := []struct {
		b    Body
		want [3]int // 22.05, 24.11, 26.05
	}{
		{&TaskExit{ReturnCode: 0, TaskIDs: []uint32{0}, StepID: step}, [3]int{28, 36, 36}},
		{&LaunchTasksResponse{StepID: step, NodeName: "p1", LocalPIDs: []uint32{1}, TaskIDs: []uint32{0}}, [3]int{43, 51, 51}},
		{&SignalTasks{StepID: step, Signal: 9}, [3]int{16, 24, 24}},
		{&StepIDMsg{Type: SrunJobComplete, StepID: step}, [3]int{12, 20, 20}},
		{&EpilogComplete{JobID: 1, NodeName: "p1"}, [3]int{15, 15, 31}},
		{&CompleteProlog{JobID: 1, NodeName: "p1"}, [3]int{15, 15, 31}},
	}
	for _, tc := range tests {
		for i, v := range Spoken() {
			enc, err := EncodeBody(v, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want[2-i] // Spoken is newest first
			if len(enc) != want {
				t.Errorf("%v at %s: %d bytes, want %d", tc.b.MsgType(), ReleaseName(v), len(enc), want)
			}
		}
	}
}

// TestNoLayout: a (type, release) pair without a registered codec is an
// error, never decoded with another release's layout.
func TestNoLayout(t *testing.T) {
	frame := readGolden(t, "batch_job_launch_v2600.bin")[4:]
	m, err := DecodeMessage(frame)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint16{Version2108, Version2302, Version2311, Version2405, Version2505, Version2511} {
		if _, err := DecodeBody(v, RequestBatchJobLaunch, m.Body); !errors.Is(err, ErrNoLayout) || !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("decode at 0x%04x: %v", v, err)
		}
		if _, err := EncodeBody(v, &BatchJobLaunch{Cred: &Cred{}}); !errors.Is(err, ErrNoLayout) {
			t.Errorf("encode at 0x%04x: %v", v, err)
		}
	}
	// What a 24.11+ controller sends a node it has not heard from, at its
	// oldest version, has a layout at every header version.
	for _, v := range headerVersions {
		for _, typ := range []MsgType{RequestNodeRegistrationStatus, RequestPing, ResponseSlurmRC, ResponsePingSlurmd} {
			if !HasBody(v, typ) {
				t.Errorf("%v has no layout at 0x%04x", typ, v)
			}
		}
	}
	if _, err := DecodeBody(Version2411, RequestNodeHealthCheck, []byte{1}); !errors.Is(err, ErrNoLayout) {
		t.Errorf("REQUEST_NODE_HEALTH_CHECK at 24.11: %v", err)
	}
	if reflect.DeepEqual(Layouts()[RequestLaunchTasks], spoken) == false {
		t.Errorf("REQUEST_LAUNCH_TASKS layouts %04x", Layouts()[RequestLaunchTasks])
	}
}

// TestHeader_Releases: the 23.11 net_cred and the 24.11 tree_depth in the
// forward block, and no auth block with FlagNoAuthCred.
func TestHeader_Releases(t *testing.T) {
	fwd := Forward{Count: 1, Nodes: "p2", TimeoutMS: 10000, TreeWidth: 1, NetCred: "nc", TreeDepth: 1}
	for _, tc := range []struct {
		v     uint16
		flags uint16
		want  Forward
	}{
		{Version2205, 0, Forward{Count: 1, Nodes: "p2", TimeoutMS: 10000, TreeWidth: 1}},
		{Version2411, 0, Forward{Count: 1, Nodes: "p2", TimeoutMS: 10000, TreeWidth: 1, TreeDepth: 1}},
		{Version2411, FlagPackAddrs, fwd},
		{Version2605, FlagPackAddrs, fwd},
	} {
		h := Header{Version: tc.v, Flags: tc.flags | FlagNoAuthCred, MsgType: ResponseSlurmRC, Forward: fwd}
		frame := EncodeMessage(h, AuthBlock{PluginID: AuthPluginMunge, Cred: "ignored"}, []byte{0, 0, 0, 0})
		m, err := DecodeMessage(frame[4:])
		if err != nil {
			t.Fatalf("0x%04x: %v", tc.v, err)
		}
		if m.Header.Forward != tc.want || !reflect.DeepEqual(m.Auth, AuthBlock{}) || !bytes.Equal(m.Body, []byte{0, 0, 0, 0}) {
			t.Errorf("0x%04x flags %x: %+v auth %+v", tc.v, tc.flags, m.Header.Forward, m.Auth)
		}
		if !bytes.Equal(m.AuthAndBody, m.Body) {
			t.Errorf("0x%04x: auth+body %x", tc.v, m.AuthAndBody)
		}
	}
	// The auth/slurm block is one packstr, like munge's.
	h := Header{Version: Version2411, MsgType: RequestPing}
	frame := EncodeMessage(h, AuthBlock{PluginID: AuthPluginSlurm, Cred: "eyJ.a.b"}, nil)
	m, err := DecodeMessage(frame[4:])
	if err != nil || m.Auth.PluginID != AuthPluginSlurm || m.Auth.Cred != "eyJ.a.b" {
		t.Fatalf("%+v %v", m.Auth, err)
	}
}

// TestCredToken: a cred/slurm credential is a packstr(JWT) whose payload
// claim holds the signed fields; it decodes to those fields and re-encodes
// as the same token.
func TestCredToken(t *testing.T) {
	c := forRelease(launchSampleBodies()[0], Version2411).(*LaunchTasks).Cred
	fields, err := c.PackFields(Version2411)
	if err != nil {
		t.Fatal(err)
	}
	tok := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + b64url(fmt.Sprintf(`{"iat":1,"exp":61,"payload":"%s"}`, b64std(fields))) + ".c2ln"
	p := NewPacker(0)
	p.Str(tok)
	d, err := DecodeCred(NewUnpacker(p.Bytes()), Version2411)
	if err != nil {
		t.Fatal(err)
	}
	if d.Token != tok || !bytes.Equal(d.Signed, fields) || d.JobHostlist != c.JobHostlist || string(d.Signature) != tok+"\x00" {
		t.Fatalf("%+v", d)
	}
	re := NewPacker(0)
	if err := PackCred(re, Version2411, d); err != nil || !bytes.Equal(re.Bytes(), p.Bytes()) {
		t.Fatalf("re-pack: %v", err)
	}
	if err := PackCred(NewPacker(0), Version2205, d); !errors.Is(err, ErrNoLayout) {
		t.Fatalf("token at 22.05: %v", err)
	}
	// A munge-form credential is never taken for a token.
	mp := NewPacker(0)
	if err := PackCred(mp, Version2411, c); err != nil {
		t.Fatal(err)
	}
	if d, err := DecodeCred(NewUnpacker(mp.Bytes()), Version2411); err != nil || d.Token != "" {
		t.Fatalf("munge form: %v %+v", err, d)
	}
}

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
func b64std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestNamesIn: the per-release name tables follow the header version.
func TestNamesIn(t *testing.T) {
	if !RequestNodeHealthCheck.KnownIn(Version2605) || RequestNodeHealthCheck.KnownIn(Version2411) || RequestNodeHealthCheck.KnownIn(Version2205) {
		t.Error("REQUEST_NODE_HEALTH_CHECK is 26.05's")
	}
	if RequestNodeHealthCheck.NameIn(Version2511) != "MsgType(1029)" || RequestNodeHealthCheck.NameIn(Version2605) != "REQUEST_NODE_HEALTH_CHECK" {
		t.Errorf("names %q %q", RequestNodeHealthCheck.NameIn(Version2511), RequestNodeHealthCheck.NameIn(Version2605))
	}
	if !RequestLaunchTasks.KnownIn(Version2011) || !RequestLaunchTasks.KnownIn(Version2302) {
		t.Error("REQUEST_LAUNCH_TASKS")
	}
	// 4027 was renamed in 26.05.
	if RCNameIn(Version2411, 4027) != "ESLURMD_JOB_NOTRUNNING" || RCNameIn(Version2605, 4027) != "ESLURMD_STEP_NOTRUNNING" {
		t.Errorf("4027: %s %s", RCNameIn(Version2411, 4027), RCNameIn(Version2605, 4027))
	}
}

// TestFormatSLUID: as 26.05's srun put it in SLURM_JOB_SLUID for the job
// whose step ids carried SLUID 0xe2a688c42cef0800 (captured launch).
func TestFormatSLUID(t *testing.T) {
	if got := FormatSLUID(0xe2a688c42cef0800); got != "sE59M8RGPEY200" {
		t.Fatalf("got %s", got)
	}
	if got := FormatSLUID(0); got != "s0000000000000" {
		t.Fatalf("zero: %s", got)
	}
}

// TestParseSLUID: the inverse of FormatSLUID, as lenient as str2sluid about
// case and the letters Crockford's alphabet leaves out, strict otherwise.
func TestParseSLUID(t *testing.T) {
	for _, s := range []uint64{0, 1, 0x2ab688c1ce287400, 0xe2a688c42cef0800, ^uint64(0)} {
		if got, err := ParseSLUID(FormatSLUID(s)); err != nil || got != s {
			t.Errorf("%x: %x %v", s, got, err)
		}
	}
	if got, err := ParseSLUID("Se59m8rgpey200"); err != nil || got != 0xe2a688c42cef0800 {
		t.Errorf("lower case: %x %v", got, err)
	}
	if got, err := ParseSLUID("s000000000OIL0"); err != nil || got != 0b00000_00001_00001_00000 {
		t.Errorf("O, I, L: %b %v", got, err)
	}
	for _, bad := range []string{"", "s", "x0000000000000", "s000000000000", "s00000000000000", "s000000000000U", "sG000000000000", "s00000000000é"} {
		if _, err := ParseSLUID(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
