package munge

import (
	"errors"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

func TestSentinel_Mapping(t *testing.T) {
	tests := []struct {
		code int
		want error
	}{
		{eCredExpired, auth.ErrExpired},
		{eCredRewound, auth.ErrRewound},
		{eCredReplayed, auth.ErrReplayed},
		{eCredUnauthorized, auth.ErrUIDRestricted},
		{eSocket, auth.ErrUnavailable},
		{eTimeout, auth.ErrUnavailable},
		{eSnafu, auth.ErrUnavailable},
		{eNoMemory, auth.ErrUnavailable},
		{eBadCred, auth.ErrInvalid},
		{eBadVersion, auth.ErrInvalid},
		{eBadCipher, auth.ErrInvalid},
		{eBadMAC, auth.ErrInvalid},
		{eBadZip, auth.ErrInvalid},
		{eBadRealm, auth.ErrInvalid},
		{eCredInvalid, auth.ErrInvalid},
		{eBadArg, auth.ErrInvalid},
		{eBadLength, auth.ErrInvalid},
		{eOverflow, auth.ErrInvalid},
		{99, auth.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(codeName(tc.code), func(t *testing.T) {
			err := error(&Error{Op: "decode", Code: tc.code, Msg: "m", Err: sentinel(tc.code)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v is not %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "munge: decode: m (") {
				t.Fatalf("Error() = %q", err.Error())
			}
		})
	}
}
