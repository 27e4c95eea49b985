package auth

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// goldenFrame is one entry of testdata/frames.json (see testdata/README.md).
type goldenFrame struct {
	Name         string `json:"name"`
	Version      uint16 `json:"version"`
	MsgType      uint16 `json:"msg_type"`
	BodyLen      int    `json:"body_len"`
	Frame        string `json:"frame"`
	MungePayload string `json:"munge_payload"`
}

// splitFrame is a minimal, test-only frame parser: it returns the header
// version and type, the credential string and the body. Real frames in the
// golden set have no forward/ret lists.
func splitFrame(frame []byte) (version, msgType uint16, cred string, body []byte, err error) {
	be := binary.BigEndian
	if len(frame) < 4 || int(be.Uint32(frame)) != len(frame)-4 {
		return 0, 0, "", nil, fmt.Errorf("bad length prefix")
	}
	p := frame[4:]
	version = be.Uint16(p)
	p = p[4:] // version, flags
	if version < 0x2600 {
		p = p[2:] // msg_index
	}
	msgType = be.Uint16(p)
	bodyLen := int(be.Uint32(p[2:]))
	fwd, ret := be.Uint16(p[6:]), be.Uint16(p[8:])
	if fwd != 0 || ret != 0 {
		return 0, 0, "", nil, fmt.Errorf("forward/ret lists not handled")
	}
	p = p[10:]
	switch fam := be.Uint16(p); fam {
	case 0:
		p = p[2:]
	case 2:
		p = p[8:]
	default:
		return 0, 0, "", nil, fmt.Errorf("address family %d not handled", fam)
	}
	if id := be.Uint32(p); id != 101 {
		return 0, 0, "", nil, fmt.Errorf("auth plugin %d, want 101 (munge)", id)
	}
	n := int(be.Uint32(p[4:]))
	cred = string(p[8 : 8+n])
	if !strings.HasSuffix(cred, "\x00") {
		return 0, 0, "", nil, fmt.Errorf("credential without NUL")
	}
	body = p[8+n:]
	if len(body) != bodyLen {
		return 0, 0, "", nil, fmt.Errorf("body %d bytes, header says %d", len(body), bodyLen)
	}
	return version, msgType, strings.TrimSuffix(cred, "\x00"), body, nil
}

func loadGolden(t *testing.T) []goldenFrame {
	t.Helper()
	js, err := os.ReadFile("testdata/frames.json")
	if err != nil {
		t.Fatal(err)
	}
	var frames []goldenFrame
	if err := json.Unmarshal(js, &frames); err != nil {
		t.Fatal(err)
	}
	if len(frames) == 0 {
		t.Fatal("no golden frames")
	}
	return frames
}

// TestPayload_RealFrames recomputes the munge payload of frames captured
// from real 22.05.8 scontrol/sinfo/slurmctld/slurmd and compares it with
// what unmunge returned for their credentials.
func TestPayload_RealFrames(t *testing.T) {
	var sawK12, sawOld, sawEmpty bool
	for i, g := range loadGolden(t) {
		t.Run(fmt.Sprintf("%02d %s", i, g.Name), func(t *testing.T) {
			frame, _ := hex.DecodeString(g.Frame)
			want, _ := hex.DecodeString(g.MungePayload)
			version, typ, cred, body, err := splitFrame(frame)
			if err != nil {
				t.Fatal(err)
			}
			if version != g.Version || typ != g.MsgType || len(body) != g.BodyLen {
				t.Fatalf("frame says v%#x type %d body %d; json says v%#x type %d body %d",
					version, typ, len(body), g.Version, g.MsgType, g.BodyLen)
			}
			if !strings.HasPrefix(cred, "MUNGE:") || !strings.HasSuffix(cred, ":") {
				t.Fatalf("credential %q is not a munge string", cred)
			}
			kind := HashK12
			if version < 0x2600 {
				kind = HashNone
				sawOld = true
			} else {
				sawK12 = true
			}
			sawEmpty = sawEmpty || len(body) == 0
			if got := Payload(version, typ, body, kind); !bytes.Equal(got, want) {
				t.Fatalf("Payload = %x\nunmunge  %x", got, want)
			}
			seen, err := CheckPayload(version, typ, body, want, HashPolicy{})
			if err != nil || seen != kind {
				t.Fatalf("CheckPayload = %v, %v; want %v", seen, err, kind)
			}
			if len(body) > 0 {
				bad := bytes.Clone(body)
				bad[len(bad)-1] ^= 1
				if _, err := CheckPayload(version, typ, bad, want, HashPolicy{}); err == nil && kind == HashK12 {
					t.Fatal("CheckPayload accepted a modified body")
				}
			}
		})
	}
	if !sawK12 || !sawOld || !sawEmpty {
		t.Fatalf("golden set lacks a case: k12=%v old=%v empty-body=%v", sawK12, sawOld, sawEmpty)
	}
}
