//go:build !linux

package proc

// RlimitTable is empty off Linux: the step manager runs on Linux only.
var RlimitTable []RlimitInfo
