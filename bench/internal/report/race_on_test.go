//go:build race

package report

// raceEnabled: under the race detector, rendering the PNGs (font rasterising) takes ~13 s,
// so the tests leave the plots out there; `go test` without -race renders them.
const raceEnabled = true
