//go:build !unix

package rpcserver

import (
	"errors"
	"net"
)

func sockname(int) (net.Addr, error) { return nil, errors.New("rpcserver: getsockname unsupported") }

func closeFD(int) {}

func nofileLimit() (int, bool) { return 0, false }
