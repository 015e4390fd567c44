//go:build race

package shmlink

// The race detector allows at most 8,128 live goroutines.
const manyGoroutines = 1000
