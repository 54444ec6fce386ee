// Package cpuclock reads CPU-time clocks: a thread's, which any thread of
// the process may read, and the process's. A time budget counted on them
// is not spent while the work waits for a CPU (a flood, a busy machine),
// as a wall-clock deadline is.
package cpuclock
