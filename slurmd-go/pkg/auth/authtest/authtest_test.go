package authtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

func TestFake_RoundTrip(t *testing.T) {
	f := New(1000, 100)
	ctx := context.Background()
	cred, err := f.Encode(ctx, []byte{2, 1, 2, 3}, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cred, Prefix) || !strings.HasSuffix(cred, ":") {
		t.Fatalf("cred %q", cred)
	}
	for _, c := range []string{cred, cred + "\x00"} { // the wire form has a NUL
		got, err := f.Decode(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		want := auth.Credential{UID: 1000, GID: 100, Payload: []byte{2, 1, 2, 3}}
		if got.UID != want.UID || got.GID != want.GID || !bytes.Equal(got.Payload, want.Payload) || got.Replayed {
			t.Fatalf("Decode = %+v, want %+v", got, want)
		}
	}
}

func TestFake_DeterministicAndUnique(t *testing.T) {
	clock := func() time.Time { return time.Unix(1700000000, 0) }
	a, b := New(0, 0), New(0, 0)
	a.SetClock(clock)
	b.SetClock(clock)
	ctx := context.Background()
	a1, _ := a.Encode(ctx, []byte("p"), 0)
	b1, _ := b.Encode(ctx, []byte("p"), 0)
	a2, _ := a.Encode(ctx, []byte("p"), 0)
	if a1 != b1 {
		t.Fatalf("same inputs, different creds: %q vs %q", a1, b1)
	}
	if a1 == a2 {
		t.Fatal("two encodes gave the same credential")
	}
}

func TestFake_Decode_Failures(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	tests := []struct {
		name    string
		setup   func(f *Fake)
		cred    func(f *Fake) string
		wantErr error
	}{
		{"restricted to another uid", nil,
			func(f *Fake) string { return mustEncode(t, f, 12345) }, auth.ErrUIDRestricted},
		{"root has no exemption", func(f *Fake) { f.SetDecoderUID(0) },
			func(f *Fake) string { return mustEncode(t, f, 1) }, auth.ErrUIDRestricted},
		{"restricted to decoder is fine", func(f *Fake) { f.SetDecoderUID(12345) },
			func(f *Fake) string { return mustEncode(t, f, 12345) }, nil},
		{"expired", func(f *Fake) { f.SetTTL(time.Second) },
			func(f *Fake) string { return Forge(0, 0, auth.UIDAny, nil, t0.Add(-2*time.Second), 1) }, auth.ErrExpired},
		{"just inside ttl", func(f *Fake) { f.SetTTL(time.Second) },
			func(f *Fake) string { return Forge(0, 0, auth.UIDAny, nil, t0.Add(-time.Second), 1) }, nil},
		{"rewound", nil,
			func(f *Fake) string { return Forge(0, 0, auth.UIDAny, nil, t0.Add(time.Second), 1) }, auth.ErrRewound},
		{"garbage", nil, func(*Fake) string { return "garbage" }, auth.ErrInvalid},
		{"real munge cred", nil, func(*Fake) string { return "MUNGE:AwQFAAA6tfq01vuf:" }, auth.ErrInvalid},
		{"bad base64", nil, func(*Fake) string { return Prefix + "!!!:" }, auth.ErrInvalid},
		{"bad json", nil, func(*Fake) string { return Prefix + "bm90IGpzb24:" }, auth.ErrInvalid},
		{"no trailing colon", nil, func(f *Fake) string { return strings.TrimSuffix(mustEncode(t, f, auth.UIDAny), ":") }, auth.ErrInvalid},
		{"forced unavailable", func(f *Fake) { f.FailDecode(auth.ErrUnavailable) },
			func(f *Fake) string { return mustEncode(t, f, auth.UIDAny) }, auth.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(0, 0)
			f.SetClock(func() time.Time { return t0 })
			if tc.setup != nil {
				tc.setup(f)
			}
			c, err := f.Decode(context.Background(), tc.cred(f))
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("Decode = %+v, %v; want %v", c, err, tc.wantErr)
			}
			if err != nil && (c.UID != 0 || c.Payload != nil) {
				t.Fatalf("credential not zero on error: %+v", c)
			}
		})
	}
}

func mustEncode(t *testing.T, f *Fake, restrict uint32) string {
	t.Helper()
	c, err := f.Encode(context.Background(), []byte("x"), restrict)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFake_Replay(t *testing.T) {
	ctx := context.Background()
	f := New(0, 0)
	cred := mustEncode(t, f, auth.UIDAny)
	for i := range 2 { // off by default: munged-less unit tests reuse creds freely
		if _, err := f.Decode(ctx, cred); err != nil {
			t.Fatalf("decode %d with replay detection off: %v", i, err)
		}
	}
	f.SetReplay(true, false)
	cred = mustEncode(t, f, auth.UIDAny)
	if _, err := f.Decode(ctx, cred); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Decode(ctx, cred); !errors.Is(err, auth.ErrReplayed) {
		t.Fatalf("second decode err = %v, want ErrReplayed", err)
	}
	f.SetReplay(true, true)
	c, err := f.Decode(ctx, cred)
	if err != nil || !c.Replayed || string(c.Payload) != "x" {
		t.Fatalf("AllowReplay decode = %+v, %v", c, err)
	}
}

func TestFake_Encode_Failures(t *testing.T) {
	f := New(0, 0)
	f.FailEncode(auth.ErrUnavailable)
	if _, err := f.Encode(context.Background(), nil, auth.UIDAny); !errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	f.FailEncode(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Encode(ctx, nil, auth.UIDAny); !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: err = %v", err)
	}
	if _, err := f.Decode(ctx, mustEncode(t, f, auth.UIDAny)); !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: err = %v", err)
	}
}

func TestFake_Identity(t *testing.T) {
	f := New(0, 0)
	f.SetIdentity(1000, 1000)
	c, err := f.Decode(context.Background(), mustEncode(t, f, auth.UIDAny))
	if err != nil || c.UID != 1000 || c.GID != 1000 {
		t.Fatalf("Decode = %+v, %v", c, err)
	}
	forged := Forge(4242, 42, auth.UIDAny, []byte("p"), time.Now(), 7)
	c, err = f.Decode(context.Background(), forged)
	if err != nil || c.UID != 4242 || c.GID != 42 {
		t.Fatalf("Decode(forged) = %+v, %v", c, err)
	}
}

func TestFake_Concurrent(t *testing.T) {
	f := New(0, 0)
	f.SetReplay(true, false)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			p := []byte(fmt.Sprint(i))
			cred, err := f.Encode(context.Background(), p, auth.UIDAny)
			if err != nil {
				t.Error(err)
				return
			}
			c, err := f.Decode(context.Background(), cred)
			if err != nil || !bytes.Equal(c.Payload, p) {
				t.Errorf("goroutine %d: %+v, %v", i, c, err)
			}
		})
	}
	wg.Wait()
}
