//go:build !race

package shmlink

// Calls in flight at once on one client in TestManyConcurrentCallsWithContexts.
const manyGoroutines = 10000
