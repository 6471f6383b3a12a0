//go:build race

package recovery_test

// raceEnabled says the race detector is on: slow tests sample.
const raceEnabled = true
