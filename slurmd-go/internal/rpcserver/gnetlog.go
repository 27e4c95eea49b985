package rpcserver

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// gnetLogger adapts hclog to gnet's logging.Logger so that gnet never builds its zap logger
// path at runtime. gnet's own Info lines go to Debug; Fatalf is logged at Error and does not
// exit (the supervisor decides).
type gnetLogger struct{ l hclog.Logger }

var _ logging.Logger = gnetLogger{}

func (g gnetLogger) Debugf(format string, args ...any) {
	if g.l.IsDebug() {
		g.l.Debug("gnet", "msg", fmt.Sprintf(format, args...))
	}
}

func (g gnetLogger) Infof(format string, args ...any) {
	if g.l.IsDebug() {
		g.l.Debug("gnet", "msg", fmt.Sprintf(format, args...))
	}
}

func (g gnetLogger) Warnf(format string, args ...any) {
	g.l.Warn("gnet", "msg", fmt.Sprintf(format, args...))
}

func (g gnetLogger) Errorf(format string, args ...any) {
	g.l.Error("gnet", "msg", fmt.Sprintf(format, args...))
}

func (g gnetLogger) Fatalf(format string, args ...any) {
	g.l.Error("gnet fatal", "msg", fmt.Sprintf(format, args...))
}
