//go:build !race

package pebble

const raceEnabled = false
