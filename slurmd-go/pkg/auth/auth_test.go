package auth

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestRC(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want uint32
	}{
		{"nil", nil, 0},
		{"expired", ErrExpired, 1007},
		{"rewound", ErrRewound, 1007},
		{"replayed", ErrReplayed, 1007},
		{"uid restricted", ErrUIDRestricted, 1007},
		{"invalid", ErrInvalid, 1007},
		{"unavailable", ErrUnavailable, 1007},
		{"hash mismatch", ErrHashMismatch, 5003},
		{"hash missing", ErrHashMissing, 5003},
		{"wrapped expired", fmt.Errorf("munge: decode: %w", ErrExpired), 1007},
		{"wrapped hash", fmt.Errorf("rpc: %w", fmt.Errorf("auth: %w: detail", ErrHashMismatch)), 5003},
		{"unavailable and deadline", fmt.Errorf("munge: %w: %w", ErrUnavailable, context.DeadlineExceeded), 1007},
		{"foreign error", errors.New("boom"), 1007},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RC(tc.err); got != tc.want {
				t.Fatalf("RC(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestSentinels_Distinct(t *testing.T) {
	all := []error{ErrExpired, ErrRewound, ErrReplayed, ErrUIDRestricted, ErrInvalid,
		ErrUnavailable, ErrHashMismatch, ErrHashMissing}
	for i, a := range all {
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Fatalf("%v is %v", a, b)
			}
		}
	}
}
