package slurmproto

// Message types of releases newer than 22.05 that the generated table does
// not have yet.
const (
	RequestNodeHealthCheck MsgType = 1029 // 26.05
)
