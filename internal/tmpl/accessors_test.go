package tmpl

// CostLimit reports the per-evaluation cost limit in force.
func (e *Env) CostLimit() uint64 { return e.costLimit }

// Source returns the expression as compiled.
func (x *Expr) Source() string { return x.src }
