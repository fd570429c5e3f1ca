//go:build race

package portcullis

const raceEnabled = true
