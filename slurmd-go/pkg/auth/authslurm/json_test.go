package authslurm

import "testing"

// jansson 2.14 (the chroots' libjansson4, through ctypes) wrote
// {"k": "a\x01\x1f\x7f\"\\/<>&\u2028\u2029é\t\n\r\b\f", "B": "x", "a": "x"}
// with JSON_COMPACT|JSON_SORT_KEYS as the want string below.
func TestAppendJSON_AsJansson(t *testing.T) {
	v := jsonObject{"k": "a\x01\x1f\x7f\"\\/<>&\u2028\u2029é\t\n\r\b\f", "B": "x", "a": "x"}
	want := "{\"B\":\"x\",\"a\":\"x\",\"k\":\"a\\u0001\\u001F\x7f\\\"\\\\/<>&\xe2\x80\xa8\xe2\x80\xa9\xc3\xa9\\t\\n\\r\\b\\f\"}"
	if got := string(appendJSON(nil, v)); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	nested := jsonObject{"id": jsonObject{"gids": []uint32{0, 4294967295}, "n": int64(-1)}, "u": uint32(7)}
	if got := string(appendJSON(nil, nested)); got != `{"id":{"gids":[0,4294967295],"n":-1},"u":7}` {
		t.Fatal(got)
	}
	if got := string(appendJSON(nil, "bad\xffutf8")); got != "\"bad\uFFFDutf8\"" {
		t.Fatalf("%q", got)
	}
}
