package rpcserver

import (
	"context"
	"errors"
)

// ErrNotSent is what OnReplySent's callback gets when no reply was written: the handler
// answered nothing, panicked, or the connection was given up (deadline, shutdown) first.
var ErrNotSent = errors.New("rpcserver: reply not sent")

// sentKey carries the request's *job in the ctx given to Dispatcher.Serve.
type sentKey struct{}

// OnReplySent asks to be told whether the reply of the request served under ctx reached
// the kernel: fn gets nil once it was written to the socket, or an error when it was not
// (the peer went away first, the connection timed out, nothing was answered). Slurm's
// slurmd acts on a failed reply (slurm_cred_rewind after a launch whose answer srun never
// got). fn runs at most once, on its own goroutine, after Serve returned; a later call
// replaces an earlier one. It reports false when ctx is not a request's.
func OnReplySent(ctx context.Context, fn func(err error)) bool {
	j, ok := ctx.Value(sentKey{}).(*job)
	if !ok || fn == nil {
		return false
	}
	j.sent = fn
	return true
}

// report hands the write's outcome to the OnReplySent callback, once.
func (j *job) report(err error) {
	if j.sent == nil || !j.reported.CompareAndSwap(false, true) {
		return
	}
	go j.sent(err)
}
