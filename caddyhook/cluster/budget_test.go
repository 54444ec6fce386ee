package cluster

import (
	"context"
	"testing"
	"time"
)

// TestPublishTimeoutFollowsTheBudget (issue 34 item 2): a publish gets
// the engine's timeout, or what is left of the request's budget when a
// slow idempotency claim spent some of it, at least a quarter of the
// timeout; Settle and Release get what is left of the claim's budget, at
// least an eighth.
func TestPublishTimeoutFollowsTheBudget(t *testing.T) {
	const timeout = 2 * time.Second
	s := &Spool{timeout: timeout}
	now := time.Now()
	for _, c := range []struct {
		name   string
		budget time.Time // zero: none
		min    time.Duration
		max    time.Duration
	}{
		{"no budget", time.Time{}, timeout, timeout},
		{"plenty left", now.Add(time.Minute), timeout, timeout},
		{"some left", now.Add(time.Second), timeout / 4, time.Second},
		{"spent", now.Add(-time.Second), timeout / 4, timeout / 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if !c.budget.IsZero() {
				ctx = WithBudget(ctx, c.budget)
			}
			if got := s.publishTimeout(ctx); got < c.min || got > c.max {
				t.Errorf("publish timeout %s, want between %s and %s", got, c.min, c.max)
			}
		})
	}
	i := NewIdempotency(nil, IdempotencyOptions{Timeout: timeout})
	if got := i.BudgetFrom(now).Sub(now); got != timeout+timeout/4 {
		t.Errorf("budget %s, want a timeout and a quarter", got)
	}
	spent := &Claim{i: i, budget: now.Add(-time.Second)}
	ctx, cancel := spent.finishCtx()
	defer cancel()
	if d, _ := ctx.Deadline(); time.Until(d) > timeout/8 || time.Until(d) <= 0 {
		t.Errorf("settle after the budget was spent: %s left, want at most %s", time.Until(d), timeout/8)
	}
}
