package slurmproto

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Golden frames of real Slurm 24.11.5 and 26.05.5 daemons, auth/munge and
// auth/slurm, a 26.05 controller with 24.11 nodes, the controllers'
// answers to versions they do not read, and 22.05.8's sbcast
// (testdata/README.md).
var releaseGoldenDirs = []string{"r2411/munge", "r2411/slurm", "r2605/munge", "r2605/slurm", "r2605-to-2411", "negotiation", "sbcast"}

// goldenNoCodec are captured frames whose body this codec does not decode,
// because slurmd-go does not serve or send them; each is still checked to
// be one well-formed frame whose header and auth block re-encode exactly.
var goldenNoCodec = map[MsgType]string{}

func releaseGoldenFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, d := range releaseGoldenDirs {
		fs, err := filepath.Glob(filepath.Join("testdata", d, "*.bin"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if strings.HasPrefix(filepath.Base(f), "io_init_") || strings.HasSuffix(f, "_cred_payload.bin") {
				continue // not RPC frames
			}
			files = append(files, f)
		}
	}
	if len(files) < 300 {
		t.Fatalf("only %d golden frames", len(files))
	}
	return files
}

// TestGoldenReleases_RoundTrip: every frame decodes; its body (and every
// ret_list entry) decodes with the layout registered for exactly its
// version and re-encodes to the same bytes; EncodeMessage rebuilds the
// frame byte for byte.
func TestGoldenReleases_RoundTrip(t *testing.T) {
	for _, f := range releaseGoldenFiles(t) {
		name := strings.TrimPrefix(f, "testdata/")
		t.Run(name, func(t *testing.T) {
			frame, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m, err := DecodeMessage(frame[4:])
			if err != nil {
				t.Fatalf("DecodeMessage: %v", err)
			}
			h := m.Header
			if noAuth := h.Flags&FlagNoAuthCred != 0; noAuth != (m.Auth.PluginID == 0) {
				t.Fatalf("flags 0x%x but auth plugin %d", h.Flags, m.Auth.PluginID)
			}
			if m.Auth.PluginID != 0 && !m.Auth.HasCredString() {
				t.Fatalf("auth plugin %d", m.Auth.PluginID)
			}
			if re := EncodeMessage(h, m.Auth, m.Body); !bytes.Equal(re, frame) {
				t.Fatalf("EncodeMessage differs:\n got %x\nwant %x", re, frame)
			}
			for _, e := range h.RetList {
				b, err := DecodeBody(h.Version, e.MsgType, e.Body)
				if err != nil {
					t.Fatalf("ret_list %s %v: %v", e.NodeName, e.MsgType, err)
				}
				if re, err := EncodeBody(h.Version, b); err != nil || !bytes.Equal(re, e.Body) {
					t.Fatalf("ret_list %s %v re-encode: %v\n got %x\nwant %x", e.NodeName, e.MsgType, err, re, e.Body)
				}
			}
			if strings.HasPrefix(name, "r2605-to-2411/") && h.MsgType == RequestLaunchTasks && h.Version == Version2605 {
				// A 26.05 srun's launch into an allocation of 24.11 nodes:
				// 0x2D00 header and cred_version around a credential ctld
				// made in the 24.11 layout. Stock 24.11 refuses the header
				// ("Incompatible versions"); the codec must refuse the body.
				if _, err := DecodeBody(h.Version, h.MsgType, m.Body); err == nil {
					t.Fatal("an inconsistent 26.05 launch decoded")
				}
				return
			}
			if why, ok := goldenNoCodec[h.MsgType]; ok {
				if _, err := DecodeBody(h.Version, h.MsgType, m.Body); err == nil {
					t.Fatalf("%v decodes now; take it out of goldenNoCodec (%s)", h.MsgType, why)
				}
				return
			}
			body, err := DecodeBody(h.Version, h.MsgType, m.Body)
			if err != nil {
				t.Fatalf("DecodeBody %v at 0x%04x: %v", h.MsgType, h.Version, err)
			}
			re, err := EncodeBody(h.Version, body)
			if err != nil || !bytes.Equal(re, m.Body) {
				t.Fatalf("EncodeBody: %v\n got %x\nwant %x", err, re, m.Body)
			}
			// The same bytes read with the other spoken releases' layouts
			// either fail or differ: nothing is release-neutral by accident
			// where a layout changed (the credential carriers). An sbcast
			// token is JSON, and FILE_BCAST's layout is the same in 24.11
			// and 26.05: that body is release-neutral by design.
			if signed, tok, ok := signedOf(body); ok && !(h.MsgType == RequestFileBcast && tok != "") {
				for _, v := range Spoken() {
					if v == h.Version {
						continue
					}
					if other, err := DecodeBody(v, h.MsgType, m.Body); err == nil {
						if oSigned, oTok, ok := signedOf(other); ok && bytes.Equal(oSigned, signed) && oTok == tok {
							t.Errorf("also decodes identically at 0x%04x", v)
						}
					}
				}
			}
		})
	}
}

// TestGoldenReleases_CredPayload: a job credential's signed bytes are what
// the signer signed: the munge payload (unmunge -o) or the cred/slurm
// token's payload, saved beside the frame as *_cred_payload.bin.
func TestGoldenReleases_CredPayload(t *testing.T) {
	n := 0
	for _, f := range releaseGoldenFiles(t) {
		payload, err := os.ReadFile(payloadPath(f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		frame, _ := os.ReadFile(f)
		m, err := DecodeMessage(frame[4:])
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := goldenNoCodec[m.Header.MsgType]; ok || (strings.Contains(f, "r2605-to-2411") && m.Header.MsgType == RequestLaunchTasks && m.Header.Version == Version2605) {
			continue
		}
		body, err := DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		signed, tok, ok := signedOf(body)
		if !ok {
			t.Fatalf("%s: %T has no credential", f, body)
		}
		// An sbcast token has no payload: its file is empty, as Signed.
		if !bytes.Equal(signed, payload) {
			t.Errorf("%s: signed bytes (%d) are not the signer's payload (%d)", f, len(signed), len(payload))
		}
		if strings.Contains(f, "/slurm/") != (tok != "") {
			t.Errorf("%s: token %q", f, tok)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d credential payloads checked", n)
	}
}

// payloadPath is the *_cred_payload.bin beside a frame: the frame's name
// without its _v<version> suffix.
func payloadPath(frame string) string {
	base := strings.TrimSuffix(frame, ".bin")
	if i := strings.LastIndex(base, "_v"); i > 0 {
		base = base[:i]
	}
	return base + "_cred_payload.bin"
}

// signedOf returns the signed bytes and the token of the job or sbcast
// credential a body carries; ok is false if it carries none.
func signedOf(b Body) (signed []byte, token string, ok bool) {
	if c := credOf(b); c != nil {
		return c.Signed, c.Token, true
	}
	if m, isBcast := b.(*FileBcast); isBcast && m.Cred != nil {
		return m.Cred.Signed, m.Cred.Token, true
	}
	return nil, "", false
}

func credOf(b Body) *Cred {
	switch m := b.(type) {
	case *LaunchTasks:
		return m.Cred
	case *BatchJobLaunch:
		return m.Cred
	case *LaunchProlog:
		return m.Cred
	case *KillJob:
		return m.Cred
	case *ReattachTasks:
		return m.Cred
	}
	return nil
}

// TestGoldenReleases_SetDebug: `scontrol setdebug debug2 nodes=` and
// `setdebugflags +Steps -Gres nodes=` of 24.11.5 and 26.05.5, as the node
// received them: level 6; clear bit 6 (Gres), set bit 1 (Steps).
func TestGoldenReleases_SetDebug(t *testing.T) {
	for _, tc := range []struct {
		file string
		v    uint16
		want Body
	}{
		{"r2411/munge/set_debug_level_v2a00.bin", Version2411, &SetDebugLevel{Level: 6}},
		{"r2605/munge/set_debug_level_v2d00.bin", Version2605, &SetDebugLevel{Level: 6}},
		{"r2411/munge/set_debug_flags_v2a00.bin", Version2411, &SetDebugFlags{Minus: 1 << 6, Plus: 1 << 1}},
		{"r2605/munge/set_debug_flags_v2d00.bin", Version2605, &SetDebugFlags{Minus: 1 << 6, Plus: 1 << 1}},
	} {
		frame, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeMessage(frame[4:])
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if m.Header.Version != tc.v || m.Header.MsgType != tc.want.MsgType() {
			t.Fatalf("%s: version 0x%04x type %v", tc.file, m.Header.Version, m.Header.MsgType)
		}
		b, err := DecodeBody(m.Header.Version, m.Header.MsgType, m.Body)
		if err != nil || !reflect.DeepEqual(b, tc.want) {
			t.Errorf("%s: %+v (%v), want %+v", tc.file, b, err, tc.want)
		}
	}
}

// TestGoldenReleases_NetworkCallerID: `scontrol callerid` of 22.05.8, 24.11.5
// and 26.05.5 to a stock n1 (testdata/cluster/capture.sh callerid), for a
// batch job's connection (job 1; 26.05: its batch step) and a made-up one
// (NO_VAL). The responses are what this daemon must send: re-encoded, they
// are the same bytes.
func TestGoldenReleases_NetworkCallerID(t *testing.T) {
	batch := StepID{JobID: 1, StepID: StepIDBatch, StepHetComp: NoVal}
	none := StepID{JobID: NoVal, StepID: NoVal, StepHetComp: NoVal}
	for _, r := range []struct {
		dir, suffix string
		v           uint16
	}{{".", "v2600", Version2205}, {"r2411/munge", "v2a00", Version2411}, {"r2605/munge", "v2d00", Version2605}} {
		found := &NetworkCallerIDResponse{JobID: 1, NodeName: "n1"}
		notFound := &NetworkCallerIDResponse{JobID: NoVal, NodeName: "n1"}
		if r.v >= Version2605 {
			found.StepID, notFound.StepID = batch, none
		}
		for _, tc := range []struct {
			name string
			want Body
		}{{"network_callerid_found", found}, {"network_callerid_none", notFound}} {
			file := filepath.Join("testdata", r.dir, tc.name+"_"+r.suffix+".bin")
			frame, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			m, err := DecodeMessage(frame[4:])
			if err != nil || m.Header.Version != r.v {
				t.Fatalf("%s: %v, version 0x%04x", file, err, m.Header.Version)
			}
			b, err := DecodeBody(r.v, m.Header.MsgType, m.Body)
			if err != nil || !reflect.DeepEqual(b, tc.want) {
				t.Errorf("%s: %+v (%v), want %+v", file, b, err, tc.want)
			}
			if enc, err := EncodeBody(r.v, tc.want); err != nil || !bytes.Equal(enc, m.Body) {
				t.Errorf("%s: encoded % x (%v), stock sent % x", file, enc, err, m.Body)
			}
		}
		file := filepath.Join("testdata", r.dir, "network_callerid_"+r.suffix+".bin")
		frame, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeMessage(frame[4:])
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		b, err := DecodeBody(r.v, m.Header.MsgType, m.Body)
		req, ok := b.(*NetworkCallerID)
		if err != nil || !ok {
			t.Fatalf("%s: %T %v", file, b, err)
		}
		// scontrol fills 4 of the 16 bytes for AF_INET; the rest is its stack.
		if req.AF != 2 || !bytes.Equal(req.IPSrc[:4], []byte{127, 0, 0, 1}) || !bytes.Equal(req.IPDst[:4], []byte{127, 0, 0, 1}) || req.PortSrc == 0 || req.PortDst == 0 {
			t.Errorf("%s: %+v", file, req)
		}
	}
}

// TestGoldenReleases_KillJob: REQUEST_KILL_JOB as `scancel 1` of 22.05.8,
// 24.11.5 and 26.05.5 sent it (capture.sh callerid): the job by its string
// id, SIGKILL, no flags. slurmd-go sends the same message when slurmctld
// refuses to requeue a job whose launch failed; re-encoded, the same bytes.
func TestGoldenReleases_KillJob(t *testing.T) {
	want := &KillJobRequest{StepID: StepID{JobID: NoVal, StepID: NoVal, StepHetComp: NoVal}, SJobID: "1", Signal: 9}
	for _, r := range []struct {
		file string
		v    uint16
	}{{"kill_job_scancel_v2600.bin", Version2205}, {"r2411/munge/kill_job_scancel_v2a00.bin", Version2411}, {"r2605/munge/kill_job_scancel_v2d00.bin", Version2605}} {
		frame, err := os.ReadFile(filepath.Join("testdata", r.file))
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeMessage(frame[4:])
		if err != nil || m.Header.Version != r.v {
			t.Fatalf("%s: %v, version 0x%04x", r.file, err, m.Header.Version)
		}
		b, err := DecodeBody(r.v, m.Header.MsgType, m.Body)
		if err != nil || !reflect.DeepEqual(b, want) {
			t.Errorf("%s: %+v (%v), want %+v", r.file, b, err, want)
		}
		if enc, err := EncodeBody(r.v, want); err != nil || !bytes.Equal(enc, m.Body) {
			t.Errorf("%s: encoded % x (%v), scancel sent % x", r.file, enc, err, m.Body)
		}
	}
}

// TestGoldenReleases_StepmgrProlog: with SlurmctldParameters=enable_stepmgr the
// first node's REQUEST_LAUNCH_PROLOG ends in the job buffers (packbuf, no length:
// the rest of the body); they decode as StepmgrJob and re-encode byte for byte,
// and a prolog launch without them has none.
func TestGoldenReleases_StepmgrProlog(t *testing.T) {
	for _, dir := range []string{"r2411/munge", "r2411/slurm", "r2605/munge", "r2605/slurm"} {
		t.Run(dir, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join("testdata", dir, "launch_prolog_*v2*.bin"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no prolog launches in %s: %v", dir, err)
			}
			sawStepmgr := false
			for _, f := range files {
				if strings.Contains(f, "reply") {
					continue
				}
				_, b := decodeGolden(t, strings.TrimPrefix(f, "testdata/"))
				lp := b.(*LaunchProlog)
				stepmgr := strings.Contains(f, "stepmgr")
				sawStepmgr = sawStepmgr || stepmgr
				if stepmgr != (len(lp.StepmgrJob) > 0) {
					t.Errorf("%s: %d bytes of stepmgr job buffers", f, len(lp.StepmgrJob))
				}
				if stepmgr && !bytes.Contains(lp.StepmgrJob, []byte("localhost")) {
					t.Errorf("%s: the job buffers lack the job's submit host", f)
				}
			}
			if !sawStepmgr {
				t.Fatalf("no stepmgr prolog launch in %s", dir)
			}
		})
	}
}
