//go:build race

package trace

// raceEnabled: the race detector makes scanning 70 MB of JSON take minutes.
const raceEnabled = true
