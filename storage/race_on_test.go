//go:build race

package storage

// raceEnabled says the race detector is on: slow tests sample.
const raceEnabled = true
