//go:build cgo

package munge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// These tests run against the real munged (CI runs them as root). TestMain
// starts it with scripts/ensure-munged.sh when it is not answering; nothing
// is skipped.

func TestMain(m *testing.M) {
	if err := ensureMunged(); err != nil {
		fmt.Fprintln(os.Stderr, "munge tests need munged:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func ensureMunged() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return errors.New("repository root (go.mod) not found")
		}
		dir = parent
	}
	out, err := exec.Command(filepath.Join(dir, "scripts", "ensure-munged.sh")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ensure-munged.sh: %w: %s", err, out)
	}
	return nil
}

func newMunge(t testing.TB, o Options) *Munge {
	t.Helper()
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mungeCode returns the munge_err_t inside err, or -1.
func mungeCode(err error) int {
	var me *Error
	if errors.As(err, &me) {
		return me.Code
	}
	return -1
}

// cli runs a munge CLI, optionally as another uid (needs root: setpriv).
func cli(t *testing.T, uid int, stdin string, name string, args ...string) (string, int) {
	t.Helper()
	if uid >= 0 {
		if os.Getuid() != 0 {
			t.Fatalf("decoding as uid %d needs root (setpriv); run the munge tests as root", uid)
		}
		args = append([]string{fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", name}, args...)
		name = "setpriv"
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out) + stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	}
	return string(out), 0
}

func TestNew_Options(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		wantErr bool
		socket  string
	}{
		{"zero value", Options{}, false, DefaultSocket},
		{"socket", Options{Socket: "/tmp/x.sock"}, false, "/tmp/x.sock"},
		{"ttl max", Options{TTL: -1}, false, DefaultSocket},
		{"ttl below -1", Options{TTL: -2}, true, ""},
		{"negative max in flight", Options{MaxInFlight: -1}, true, ""},
		{"NUL in socket", Options{Socket: "/tmp/a\x00b"}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.o)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New error = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && m.Socket() != tc.socket {
				t.Fatalf("Socket() = %q, want %q", m.Socket(), tc.socket)
			}
		})
	}
}

func TestMunge_RoundTrip(t *testing.T) {
	t.Parallel()
	m := newMunge(t, Options{})
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	tests := []struct {
		name     string
		payload  []byte
		restrict uint32
	}{
		{"nil payload", nil, auth.UIDAny},
		{"none hash payload", []byte{1, 0x03, 0xf0}, auth.UIDAny},
		{"k12 payload restricted to self", auth.Payload(0x2600, 1008, nil, auth.HashK12), uint32(os.Getuid())},
		{"binary with NULs", []byte{0, 0, 0, 1, 0, 255}, auth.UIDAny},
		{"64 KiB", big, auth.UIDAny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cred, err := m.Encode(ctx, tc.payload, tc.restrict)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(cred, "MUNGE:") || !strings.HasSuffix(cred, ":") || strings.ContainsRune(cred, 0) {
				t.Fatalf("credential %q is not a munge string", cred)
			}
			c, err := m.Decode(ctx, cred)
			if err != nil {
				t.Fatal(err)
			}
			want := auth.Credential{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Payload: tc.payload}
			if c.UID != want.UID || c.GID != want.GID || !bytes.Equal(c.Payload, want.Payload) || c.Replayed {
				t.Fatalf("Decode = %+v, want %+v", c, want)
			}
		})
	}
}

// The wire carries the credential with its NUL (packstr); Decode accepts
// one trailing NUL.
func TestMunge_Decode_TrailingNUL(t *testing.T) {
	t.Parallel()
	m := newMunge(t, Options{})
	cred, err := m.Encode(context.Background(), []byte("x"), auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Decode(context.Background(), cred+"\x00")
	if err != nil || string(c.Payload) != "x" {
		t.Fatalf("Decode(cred+NUL) = %+v, %v", c, err)
	}
}

// Observed munged behaviour: root gets no exemption from a uid restriction
// (Debian's munged is built without MUNGE_AUTH_ROOT_ALLOW_FLAG, and Slurm
// refuses to run otherwise), and a refused decode does not consume the
// credential: the restricted uid can still decode it once.
func TestMunge_UIDRestriction(t *testing.T) {
	t.Parallel()
	m := newMunge(t, Options{})
	ctx := context.Background()
	other := uint32(os.Getuid()) + 12345
	cred, err := m.Encode(ctx, []byte("for 12345 only"), other)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // twice: the refusal is not a replay either
		_, err = m.Decode(ctx, cred)
		if !errors.Is(err, auth.ErrUIDRestricted) || mungeCode(err) != eCredUnauthorized {
			t.Fatalf("decode %d as uid %d: err = %v, want ErrUIDRestricted (EMUNGE_CRED_UNAUTHORIZED)", i, os.Getuid(), err)
		}
		if auth.RC(err) != auth.RCAuthenticationError {
			t.Fatalf("RC = %d", auth.RC(err))
		}
	}
	out, rc := cli(t, int(other), cred, "unmunge", "-m", "/dev/null")
	if rc != 0 || out != "for 12345 only" {
		t.Fatalf("unmunge as uid %d: rc %d, out %q", other, rc, out)
	}
	// Now it has been decoded once: the owner sees a replay.
	if _, rc := cli(t, int(other), cred, "unmunge", "-m", "/dev/null"); rc != eCredReplayed {
		t.Fatalf("second unmunge as uid %d: rc %d, want %d (replayed)", other, rc, eCredReplayed)
	}
}

func TestMunge_SelfCheck(t *testing.T) {
	t.Parallel()
	if err := newMunge(t, Options{}).SelfCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// munged's replay cache: a credential decodes once. The second decode is
// EMUNGE_CRED_REPLAYED, for which munged still returns uid, gid and
// payload; AllowReplay (MULTIPLE_SLURMD) accepts it with Replayed set.
func TestMunge_Replay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	strict := newMunge(t, Options{})
	lenient := newMunge(t, Options{AllowReplay: true})
	payload := []byte("forwarded message hash")
	cred, err := strict.Encode(ctx, payload, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	first, err := strict.Decode(ctx, cred)
	if err != nil || first.Replayed {
		t.Fatalf("first decode = %+v, %v", first, err)
	}
	_, err = strict.Decode(ctx, cred)
	if !errors.Is(err, auth.ErrReplayed) || mungeCode(err) != eCredReplayed {
		t.Fatalf("second decode err = %v, want ErrReplayed", err)
	}
	for i := range 2 { // replays stay replays, and stay accepted
		c, err := lenient.Decode(ctx, cred)
		if err != nil {
			t.Fatalf("AllowReplay decode %d: %v", i, err)
		}
		if !c.Replayed || c.UID != first.UID || c.GID != first.GID || !bytes.Equal(c.Payload, payload) {
			t.Fatalf("AllowReplay decode %d = %+v, want %+v with Replayed", i, c, first)
		}
	}
	// AllowReplay does not accept anything else.
	if _, err := lenient.Decode(ctx, "MUNGE:garbage:"); !errors.Is(err, auth.ErrInvalid) {
		t.Fatalf("AllowReplay garbage err = %v", err)
	}
}

// A credential is expired once munged's clock passes encode time + TTL.
// munged has no clock seam, so this waits ~2 s (both creds in one wait):
// one from Encode with TTL=1, one from `munge -t 1`.
func TestMunge_Expired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newMunge(t, Options{TTL: 1})
	ours, err := m.Encode(ctx, []byte("short-lived"), auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	theirs, rc := cli(t, -1, "", "munge", "-t", "1", "-s", "from the cli")
	if rc != 0 {
		t.Fatalf("munge -t 1: rc %d: %s", rc, theirs)
	}
	encoded := time.Now().Unix() // >= munged's encode time of both
	// Expired iff decode_time > encode_time + ttl (whole seconds).
	time.Sleep(time.Until(time.Unix(encoded+2, 0)) + 50*time.Millisecond)
	for name, cred := range map[string]string{"Encode TTL=1": ours, "munge -t 1": strings.TrimSpace(theirs)} {
		_, err := m.Decode(ctx, cred)
		if !errors.Is(err, auth.ErrExpired) || mungeCode(err) != eCredExpired {
			t.Fatalf("%s: err = %v, want ErrExpired", name, err)
		}
		if !strings.Contains(err.Error(), "encoded ") {
			t.Fatalf("%s: error %q lacks the encode/decode times", name, err)
		}
	}
}

func TestMunge_Decode_Invalid(t *testing.T) {
	t.Parallel()
	m := newMunge(t, Options{})
	ctx := context.Background()
	valid, err := m.Encode(ctx, []byte("payload"), auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	mid := len(valid) / 2
	flipped := valid[:mid] + string(valid[mid]^0x01) + valid[mid+1:]
	tests := []struct {
		name string
		cred string
	}{
		{"empty", ""},
		{"just NUL", "\x00"},
		{"garbage", "garbage"},
		{"prefix only", "MUNGE:"},
		{"bad base64", "MUNGE:!!!!:"},
		{"short base64", "MUNGE:AAAA:"},
		{"truncated", valid[:mid]},
		{"no trailing colon", strings.TrimSuffix(valid, ":")},
		{"one bit flipped", flipped},
		{"embedded NUL", valid[:mid] + "\x00" + valid[mid:]},
		{"valid then NUL then junk", valid + "\x00junk"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := m.Decode(ctx, tc.cred)
			if !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("Decode(%q) = %+v, %v; want ErrInvalid", tc.cred, c, err)
			}
			if !reflectZero(c) {
				t.Fatalf("credential not zero on error: %+v", c)
			}
			if auth.RC(err) != auth.RCAuthenticationError {
				t.Fatalf("RC = %d", auth.RC(err))
			}
		})
	}
}

func reflectZero(c auth.Credential) bool {
	return c.UID == 0 && c.GID == 0 && c.Payload == nil && !c.Replayed
}

func TestMunge_Unavailable(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-munged.socket")
	m := newMunge(t, Options{Socket: missing})

	t.Run("deadline stops the retries", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := m.Encode(ctx, nil, auth.UIDAny)
		if !errors.Is(err, auth.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrUnavailable+DeadlineExceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("returned after %v, deadline was 250ms", d)
		}
		if !strings.Contains(err.Error(), missing) {
			t.Fatalf("error %q does not name the socket", err)
		}
	})
	t.Run("without deadline gives up after Slurm's retries", func(t *testing.T) {
		var logs bytes.Buffer
		m := newMunge(t, Options{Socket: missing, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})})
		start := time.Now()
		_, err := m.Decode(context.Background(), "MUNGE:AAAA:")
		if !errors.Is(err, auth.ErrUnavailable) || mungeCode(err) != eSocket {
			t.Fatalf("err = %v, want ErrUnavailable (EMUNGE_SOCKET)", err)
		}
		// 20 retries x 100 ms; the socket file is missing so each try fails fast.
		if d := time.Since(start); d < socketRetries*socketRetryPause || d > 10*time.Second {
			t.Fatalf("gave up after %v", d)
		}
		if n := strings.Count(logs.String(), "retrying"); n != socketRetries || !strings.Contains(logs.String(), "--num-threads=10") {
			t.Fatalf("%d retry lines, want %d, and the give-up hint; logs:\n%s", n, socketRetries, logs.String())
		}
	})
	t.Run("done ctx never reaches munged", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		good := newMunge(t, Options{})
		_, err := good.Encode(ctx, nil, auth.UIDAny)
		if !errors.Is(err, auth.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if _, err := good.Decode(ctx, "MUNGE:AAAA:"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Decode err = %v", err)
		}
	})
}

// Cross-check with the CLIs: creds from `munge` decode here, creds from
// Encode decode with `unmunge`.
func TestMunge_CLI(t *testing.T) {
	t.Parallel()
	m := newMunge(t, Options{})
	ctx := context.Background()

	t.Run("munge -s decodes here", func(t *testing.T) {
		cred, rc := cli(t, -1, "", "munge", "-s", "payload from the cli")
		if rc != 0 {
			t.Fatalf("munge: rc %d: %s", rc, cred)
		}
		c, err := m.Decode(ctx, strings.TrimSpace(cred))
		if err != nil {
			t.Fatal(err)
		}
		if string(c.Payload) != "payload from the cli" || c.UID != uint32(os.Getuid()) || c.GID != uint32(os.Getgid()) {
			t.Fatalf("Decode = %+v", c)
		}
	})
	t.Run("Encode decodes with unmunge", func(t *testing.T) {
		payload := auth.Payload(0x2600, 1008, nil, auth.HashK12)
		cred, err := m.Encode(ctx, payload, uint32(os.Getuid()))
		if err != nil {
			t.Fatal(err)
		}
		out, rc := cli(t, -1, cred, "unmunge", "-k", "UID,UID_RESTRICTION,LENGTH")
		want := fmt.Sprintf("LENGTH:          %d\n", len(payload))
		if rc != 0 || !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("(%d)", os.Getuid())) {
			t.Fatalf("unmunge rc %d, out:\n%s", rc, out)
		}
		// unmunge prints metadata, a blank line, then the raw payload.
		if !strings.HasSuffix(out, "\n\n"+string(payload)) {
			t.Fatalf("unmunge payload differs:\n%q", out)
		}
	})
	t.Run("Encode TTL shows in unmunge", func(t *testing.T) {
		cred, err := newMunge(t, Options{TTL: 42}).Encode(ctx, nil, auth.UIDAny)
		if err != nil {
			t.Fatal(err)
		}
		out, rc := cli(t, -1, cred, "unmunge", "-k", "TTL", "-m", "-")
		if rc != 0 || !strings.Contains(out, "TTL:             42") {
			t.Fatalf("unmunge rc %d, out:\n%s", rc, out)
		}
	})
}

// 200 goroutines encode+decode at once. The ctx has a deadline, so every
// call can be abandoned by its ctx.
func TestMunge_Concurrent(t *testing.T) {
	t.Parallel()
	m := newMunge(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			payload := []byte(fmt.Sprintf("goroutine %d", i))
			cred, err := m.Encode(ctx, payload, auth.UIDAny)
			if err != nil {
				errs <- err
				return
			}
			c, err := m.Decode(ctx, cred)
			if err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(c.Payload, payload) || c.Replayed {
				errs <- fmt.Errorf("goroutine %d: got %+v", i, c)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// MaxInFlight=1 serialises calls but loses none; a caller whose ctx ends
// while waiting for the slot gets ErrUnavailable.
func TestMunge_MaxInFlight(t *testing.T) {
	t.Parallel()
	m := newMunge(t, Options{MaxInFlight: 1})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			cred, err := m.Encode(ctx, []byte("q"), auth.UIDAny)
			if err == nil {
				_, err = m.Decode(ctx, cred)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	m.sem <- struct{}{} // hold the only slot
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := m.Encode(wctx, nil, auth.UIDAny)
	<-m.sem
	if !errors.Is(err, auth.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

// Each call allocates the request, the response and the payload; a leak of
// any of them (or of a connection) shows as RSS growth over many calls. The
// replayed path is included: munged returns the payload there too.
func TestMunge_NoLeak(t *testing.T) {
	m := newMunge(t, Options{AllowReplay: true})
	ctx := context.Background()
	payload := bytes.Repeat([]byte{0xab}, 8192)
	round := func(n int) {
		for range n {
			cred, err := m.Encode(ctx, payload, auth.UIDAny)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // fresh, then replayed
				if _, err := m.Decode(ctx, cred); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	round(200) // warm up
	before := rssKiB(t)
	round(2000) // a leak would be >= 2000 * 2 * 8 KiB (payloads) + creds
	grew := rssKiB(t) - before
	t.Logf("RSS grew by %d KiB", grew)
	if grew > 16*1024 {
		t.Fatalf("RSS grew by %d KiB over 2000 encode+2 decode rounds", grew)
	}
}

func rssKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kib)
			return kib
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
