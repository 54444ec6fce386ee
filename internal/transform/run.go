package transform

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"
)

// queueFactor bounds how long a call waits for a free runtime, in time
// budgets: a burst queues rather than fails, an overload fails fast. It
// outlasts the longest a call that computes holds its runtime (on a
// starved CPU, wallFactor budgets of wall-clock time, then it is stopped)
// by two budgets, so that a call queued behind one that spins gets the
// runtime once that one is stopped, however busy the machine.
const queueFactor = wallFactor + 2

// errNoRuntime is returned by pool.acquire when no runtime became free.
var errNoRuntime = errors.New("no runtime free")

// Run calls the exported function with ctx and awaits a returned Promise. As in the reference
// gateway, null means skip and returns (nil, nil); an object's own enumerable properties are the
// overrides, converted to Go values (map[string]any with string/float64/bool/nil/[]any/map[string]any)
// and capped by MaxBytes; anything else, undefined included, overrides nothing and returns an empty
// map. Errors are *Error.
//
// The call waits at most twelve time budgets (or until ctx is done) for a
// free runtime, then runs on that runtime's worker goroutine; Run returns
// when it finishes, when ctx is done, or, should the script be stuck in a
// native built-in the interrupt cannot reach, one time budget after it was stopped
// (the runtime is then discarded once it comes back).
func (p *Program) Run(ctx context.Context, in Input) (map[string]any, error) {
	return p.supervise(ctx, in.Payload, func(v *vm) (map[string]any, error) {
		return v.invoke(in, p.opts.MaxBytes)
	})
}

// outcome is what a worker reports.
type outcome struct {
	out map[string]any
	err error
}

// heapRetries is how many more times supervise runs a job that the heap
// check stopped although the call's own share of the heap growth stayed
// within its budget (or could not be told: no per-thread CPU clock).
// Neither Go nor goja can attribute allocations to a call, so that check
// starts from the whole process's heap growth (watchdog.go): a flood of
// large request bodies made about 2 % of legitimate calls fail with
// "memory limit". A call stopped because of others almost never is twice
// in a row. Guard refusals, timeouts and calls charged with their budget,
// which would repeat, are not retried.
const heapRetries = 2

// supervise runs job on a pooled runtime under the watchdog, again (on a
// fresh runtime) when the heap check stopped it without charging it with
// its budget, up to heapRetries times.
// payload is only used to sanitize error messages.
func (p *Program) supervise(ctx context.Context, payload map[string]any, job func(*vm) (map[string]any, error)) (map[string]any, error) {
	for attempt := 0; ; attempt++ {
		out, err := p.superviseOnce(ctx, payload, job)
		var e *Error
		if !errors.As(err, &e) || !e.heap || ctx.Err() != nil {
			return out, err
		}
		if attempt == heapRetries {
			e.Message = truncate(fmt.Sprintf("%s, in each of %d attempts", e.Message, attempt+1), maxMessage)
			return out, err
		}
	}
}

// superviseOnce runs job once on a pooled runtime under the watchdog.
func (p *Program) superviseOnce(ctx context.Context, payload map[string]any, job func(*vm) (map[string]any, error)) (map[string]any, error) {
	wait := queueFactor * p.opts.Timeout
	if err := p.pool.acquire(ctx, wait); err != nil {
		if errors.Is(err, errNoRuntime) {
			return nil, newError(KindTimeout, fmt.Sprintf("no runtime free within %v (%d busy)", wait, p.opts.Runtimes))
		}
		return nil, newError(KindTimeout, "canceled while waiting for a runtime: "+err.Error())
	}
	t := p.pool.newTask()
	done := make(chan outcome, 1)
	v := p.pool.take()
	if v == nil {
		var err error
		if v, err = newVM(p.opts); err != nil {
			t.finish()
			return nil, newError(KindThrow, "internal error in the transform engine: "+err.Error())
		}
		go v.serve()
	}
	v.jobs <- func() bool { return p.work(ctx, v, t, payload, job, done) }
	select {
	case o := <-done:
		return o.out, o.err
	case <-t.abandoned:
		return nil, newError(KindTimeout, fmt.Sprintf("exceeded the %v time budget and did not stop within %v more", p.opts.Timeout, p.opts.Timeout))
	case <-ctx.Done():
		return nil, newError(KindTimeout, "canceled: "+ctx.Err().Error())
	}
}

// newCall returns a call of task t with the given time budget, starting now.
func (p *Program) newCall(ctx context.Context, t *task, budget time.Duration) *call {
	c := &call{ctx: ctx, task: t, budget: p.opts.allocBudget()}
	c.setBudget(time.Now(), budget)
	return c
}

// loadBudget is the time a new runtime may take to run the module's top
// level and freeze its realm: operator code and setup, not request
// content, so it is not held to the per-call budget.
func (p *Program) loadBudget() time.Duration {
	return max(loadFactor*p.opts.Timeout, minLoadBudget)
}

// Load budget: loadFactor time budgets, at least minLoadBudget.
const (
	loadFactor    = 10
	minLoadBudget = 5 * time.Second
)

// work runs one task on v's worker goroutine (loading v first when it is
// new) and reports whether v may be reused.
func (p *Program) work(ctx context.Context, v *vm, t *task, payload map[string]any, job func(*vm) (map[string]any, error), done chan<- outcome) bool {
	var out map[string]any
	var err error
	keep := true
	if !v.ready {
		_, keep, err = p.run(v, p.newCall(ctx, t, p.loadBudget()), payload, func(v *vm) (map[string]any, error) {
			return nil, v.load(p.code, p.export, p.bigint)
		})
	}
	if err == nil {
		out, keep, err = p.run(v, p.newCall(ctx, t, p.opts.Timeout), payload, job)
	}
	if keep {
		keep = p.pool.put(v)
	}
	t.finish()
	done <- outcome{out: out, err: err}
	return keep
}

// run executes f as one supervised call on v and reports whether v is
// still fit for reuse.
func (p *Program) run(v *vm, c *call, payload map[string]any, f func(*vm) (map[string]any, error)) (map[string]any, bool, error) {
	c.rt = v.rt
	v.guard.call = c
	p.watch.add(c)
	var out map[string]any
	crashed := false
	err := func() (err error) {
		// the call keeps its OS thread while it runs, so that the
		// thread's CPU time is the call's (the watchdog's heap check
		// charges by CPU share); the watchdog's lock is taken outside,
		// as a locked thread that blocks must be woken by name
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c.setCPUClock(threadCPUClock())
		defer func() {
			// A panic here is a bug in this package or the runtime; keep
			// the process alive, report it, and drop the runtime.
			if x := recover(); x != nil {
				crashed = true
				err = newError(KindThrow, "internal error in the transform engine")
			}
		}()
		out, err = f(v)
		return err
	}()
	if _, ok := errors.AsType[*goja.StackOverflowError](err); ok {
		crashed = true // unwound like an interrupt; start afresh
	}
	if err != nil && c.reason.Load() == reasonNone {
		err = v.describe(err, payload)
	}
	p.watch.remove(c)
	if r := c.reason.Load(); r != reasonNone {
		out, err = nil, p.stopError(c, r)
	}
	v.guard.call = nil
	keep := c.reason.Load() == reasonNone && !crashed && (v.ready || err == nil)
	if keep {
		v.rt.ClearInterrupt()
	}
	return out, keep, err
}

// stopError is the error of a call the watchdog or a guard stopped.
func (p *Program) stopError(c *call, reason int32) *Error {
	switch reason {
	case reasonTimeout:
		if c.detail != "" {
			return newError(KindTimeout, c.detail)
		}
		return newError(KindTimeout, fmt.Sprintf("exceeded the %v time budget", c.timeBudget))
	case reasonCanceled:
		return newError(KindTimeout, "canceled: "+context.Cause(c.ctx).Error())
	default:
		if c.detail != "" {
			return newError(KindMemory, c.detail)
		}
		e := newError(KindMemory, fmt.Sprintf("memory limit: the heap grew by more than %d bytes during the call", c.budget))
		e.heap = c.uncharged
		return e
	}
}

// RunEach calls the exported function once per element of items, the
// list at the top-level payload key: each call sees ctx.payload as the
// reference gateway's forEach builds it, {...payload, [key]: [item]}. The
// payload is converted once and each element's view costs what the element
// costs, whatever the size of the rest of the payload. All calls run on one
// runtime, each with its own time and memory budget. It returns one result
// per element (as Run does: nil to skip, else the overrides) and stops at
// the first failure, which it returns with the results before it; the
// failing element is the one at index len(results). A retry after a heap
// stop (see heapRetries) resumes at the element that was stopped.
func (p *Program) RunEach(ctx context.Context, in Input, key string, items []any) ([]map[string]any, error) {
	return p.runEach(ctx, in, key, items, nil)
}

// runEach is RunEach; before, when not nil, is called on the worker
// before each element's call (a test's way in).
func (p *Program) runEach(ctx context.Context, in Input, key string, items []any, before func(v *vm, i int)) ([]map[string]any, error) {
	results := make([]map[string]any, 0, len(items))
	_, err := p.supervise(ctx, in.Payload, func(v *vm) (map[string]any, error) {
		var parts ctxParts
		if err := v.protect(func() (err error) {
			parts, err = v.ctxParts(in)
			return err
		}); err != nil {
			return nil, err
		}
		for len(results) < len(items) {
			item := items[len(results)]
			// every element (the first too: the payload conversion
			// had its own) gets a fresh time and memory budget
			p.watch.renew(v.guard.call, p.opts.Timeout)
			var ctxVal goja.Value
			if err := v.protect(func() error {
				jsItem, err := v.jsValue(item, 2)
				if err != nil {
					if errors.Is(err, errStopped) {
						return err
					}
					return newError(KindInput, err.Error())
				}
				view, err := v.eachView(goja.Undefined(), parts[0], v.rt.ToValue(key), v.rt.NewArray(jsItem))
				if err != nil {
					return err
				}
				each := parts
				each[0] = view
				ctxVal, err = v.makeCtx(goja.Undefined(), each[:]...)
				return err
			}); err != nil {
				return nil, err
			}
			if before != nil {
				before(v, len(results))
			}
			out, err := v.call(ctxVal, p.opts.MaxBytes)
			if err != nil {
				return nil, err
			}
			results = append(results, out)
		}
		return nil, nil
	})
	return results, err
}

// invoke builds ctx, calls the export, awaits a promise and converts the
// result.
func (v *vm) invoke(in Input, maxBytes int64) (map[string]any, error) {
	var ctxVal goja.Value
	if err := v.protect(func() (err error) {
		ctxVal, err = v.ctxValue(in)
		return err
	}); err != nil {
		return nil, err
	}
	return v.call(ctxVal, maxBytes)
}

// call calls the export with ctxVal, awaits a promise and converts the
// result.
func (v *vm) call(ctxVal goja.Value, maxBytes int64) (map[string]any, error) {
	res, err := v.fn(goja.Undefined(), ctxVal)
	if err != nil {
		return nil, err
	}
	if pr, ok := promiseOf(res); ok {
		switch pr.State() {
		case goja.PromiseStateFulfilled:
			res = pr.Result()
		case goja.PromiseStateRejected:
			return nil, &rejection{value: pr.Result()}
		default:
			return nil, newError(KindResult, "the returned promise never settled (there are no timers or I/O to wait for)")
		}
	}
	var out map[string]any
	err = v.protect(func() (err error) {
		e := &exporter{rt: v.rt, budget: maxBytes}
		out, err = e.top(res)
		return err
	})
	return out, err
}

// promiseType is what a promise object exports as.
var promiseType = reflect.TypeFor[*goja.Promise]()

// promiseOf returns v as a promise without exporting anything else
// (Export of a plain object would run its getters outside the runtime).
func promiseOf(v goja.Value) (*goja.Promise, bool) {
	o, ok := v.(*goja.Object)
	if !ok || o.ExportType() != promiseType {
		return nil, false
	}
	pr, ok := o.Export().(*goja.Promise)
	return pr, ok
}

// rejection is a promise the script rejected.
type rejection struct{ value goja.Value }

func (r *rejection) Error() string { return "promise rejected" }

// describe turns a failure that was not a watchdog/guard stop into an
// *Error, reading script error messages safely and sanitizing their text.
func (v *vm) describe(err error, payload map[string]any) *Error {
	var te *Error
	var rm *resultMemoryError
	var xe *exportError
	var ex *goja.Exception
	var rj *rejection
	var so *goja.StackOverflowError
	switch {
	case errors.As(err, &te):
		return te
	case errors.As(err, &so):
		_, loc := v.thrownMessage(nil, so.Stack())
		return newError(KindThrow, fmt.Sprintf("RangeError: maximum call stack size (%d) exceeded", maxCallStack)+loc)
	case errors.As(err, &rm):
		return newError(KindMemory, rm.Error())
	case errors.As(err, &xe):
		return newError(KindResult, xe.msg)
	case errors.As(err, &ex):
		text, loc := v.thrownMessage(ex.Value(), ex.Stack())
		return newError(KindThrow, sanitize(text, payload)+loc)
	case errors.As(err, &rj):
		text, loc := v.thrownMessage(rj.value, nil)
		return newError(KindThrow, "promise rejected: "+sanitize(text, payload)+loc)
	default:
		return newError(KindThrow, sanitize(err.Error(), payload))
	}
}

// thrownMessage renders a thrown value ("TypeError: …" for errors) and,
// apart, " (at file:line:col)" for the first script location of the stack,
// mapped to the original source.
func (v *vm) thrownMessage(val goja.Value, stack []goja.StackFrame) (text, loc string) {
	text = "uncaught exception (its message could not be read)"
	_ = v.protect(func() error {
		if val == nil {
			text = "uncaught exception"
			return nil
		}
		text = val.String()
		if o, ok := val.(*goja.Object); ok && len(stack) == 0 {
			if st, ok := o.Get("stack").(goja.String); ok {
				if l := firstStackLocation(st.String()); l != "" {
					loc = " (at " + l + ")"
				}
			}
		}
		return nil
	})
	for _, f := range stack {
		pos := f.Position()
		if pos.Line > 0 && pos.Filename != "" && !strings.HasPrefix(pos.Filename, "caddyhook:") {
			return text, " (at " + pos.Filename + ":" + strconv.Itoa(pos.Line) + ":" + strconv.Itoa(pos.Column) + ")"
		}
	}
	return text, loc
}

// firstStackLocation extracts "file:line:col" from the first frame line of
// an Error's stack property ("\tat fn (file:line:col(pc))").
func firstStackLocation(stack string) string {
	for line := range strings.SplitSeq(stack, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "at ") {
			continue
		}
		loc := strings.TrimPrefix(line, "at ")
		if i := strings.Index(loc, " ("); i >= 0 && strings.HasSuffix(loc, ")") {
			loc = loc[i+2 : len(loc)-1]
		}
		if j := strings.IndexByte(loc, '('); j >= 0 {
			loc = loc[:j]
		}
		if loc == "" || strings.HasPrefix(loc, "caddyhook:") || strings.HasPrefix(loc, "native") {
			continue
		}
		return loc
	}
	return ""
}
