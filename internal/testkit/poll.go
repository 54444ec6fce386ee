// Package testkit holds what the tests of several packages share: waiting
// for a condition with a deadline, the Caddy binary built once for a test
// run, set comparison and environment helpers. It needs nothing of the
// project, so that any package's own tests can use it.
package testkit

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"
)

// PollTimeout bounds the waits of the tests for something that happens
// asynchronously (a delivery, a log line, a goroutine reaching a point,
// cluster members finding each other). It is generous on purpose: a
// condition that holds returns at once, and only a broken one waits this
// long, on any machine however loaded.
const PollTimeout = 30 * time.Second

// Eventually calls cond until it returns true or timeout has passed, and
// reports whether it did. The pause between calls grows from 1ms to 50ms.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// WaitFor fails the test when cond does not hold within PollTimeout; what
// describes the condition.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	WaitForState(tb, func() string { return what }, cond)
}

// WaitForState is WaitFor whose description is computed when the wait
// fails, so that it can say the state the condition saw.
func WaitForState(tb testing.TB, describe func() string, cond func() bool) {
	tb.Helper()
	if !Eventually(PollTimeout, cond) {
		tb.Fatalf("still not the case after %v: %s", PollTimeout, describe())
	}
}

// Memberer is a node of a cluster that counts the members it sees (a
// cluster.LockSync).
type Memberer interface{ Members() int }

// WaitMembers waits until every one of nodes sees want members.
func WaitMembers(tb testing.TB, want int, nodes ...Memberer) {
	tb.Helper()
	for i, n := range nodes {
		WaitForState(tb, func() string { return fmt.Sprintf("node %d sees %d members, want %d", i, n.Members(), want) },
			func() bool { return n.Members() == want })
	}
}

// SameSet reports whether a and b hold the same strings, each once.
func SameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]int, len(a))
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] != 1 {
			return false
		}
		seen[s]--
	}
	return true
}

// JSONObjects returns, in document order, the objects of a decoded JSON
// value v (nested at any depth) for which match holds; a matching
// object's own members are not searched.
func JSONObjects(v any, match func(map[string]any) bool) []map[string]any {
	var out []map[string]any
	stack := []any{v}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch x := x.(type) {
		case map[string]any:
			if match(x) {
				out = append(out, x)
				continue
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Sort(sort.Reverse(sort.StringSlice(keys)))
			for _, k := range keys {
				stack = append(stack, x[k])
			}
		case []any:
			for _, v := range slices.Backward(x) {
				stack = append(stack, v)
			}
		}
	}
	return out
}
