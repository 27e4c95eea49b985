package slurmproto

import (
	"bytes"
	"testing"
)

// TestGresNodeConfig_Malformed: a bad magic, a short buffer, a count the
// bytes cannot hold and trailing bytes are errors, not panics.
func TestGresNodeConfig_Malformed(t *testing.T) {
	good := PackGresNodeConfig(Version2411, []GresConfRecord{{Name: "gpu", Count: 1, PluginID: 7696487}})
	badMagic := append([]byte(nil), good...)
	badMagic[4] ^= 0xff
	for name, b := range map[string][]byte{
		"empty":     nil,
		"short":     good[:len(good)-3],
		"bad magic": badMagic,
		"count":     {0x2a, 0x00, 0xff, 0xff},
		"trailing":  append(append([]byte(nil), good...), 0),
	} {
		if _, _, err := UnpackGresNodeConfig(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if v, recs, err := UnpackGresNodeConfig(PackGresNodeConfig(Version2205, nil)); err != nil || v != Version2205 || len(recs) != 0 {
		t.Errorf("no records: %#x %v %v", v, recs, err)
	}
}

// FuzzUnpackGresNodeConfig: gres_info from the wire never panics; what
// unpacks packs to bytes that unpack and pack again to the same (the first
// pack normalizes non-canonical strings, e.g. a NUL inside a packstr).
func FuzzUnpackGresNodeConfig(f *testing.F) {
	f.Add(PackGresNodeConfig(Version2205, nil))
	f.Add(PackGresNodeConfig(Version2605, []GresConfRecord{
		{Count: 1, CPUCnt: 2, ConfigFlags: 0x1e6, PluginID: 7696487, CPUs: "0", Links: "-1,0", Name: "gpu", Type: "k80"},
		{Count: 8, CPUCnt: 2, ConfigFlags: 0x200, PluginID: 1918986455, Name: "shard", UniqueID: "MIG-x/1/0"},
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, recs, err := UnpackGresNodeConfig(b)
		if err != nil {
			return
		}
		enc1 := PackGresNodeConfig(v, recs)
		v2, recs2, err := UnpackGresNodeConfig(enc1)
		if err != nil {
			t.Fatalf("re-packed gres_info does not unpack: %v", err)
		}
		if enc2 := PackGresNodeConfig(v2, recs2); !bytes.Equal(enc1, enc2) {
			t.Fatalf("pack not stable:\n%x\n%x", enc1, enc2)
		}
	})
}
