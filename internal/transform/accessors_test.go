package transform

// File returns the real path of the compiled module.
func (p *Program) File() string { return p.file }

// zombieCount reports how many abandoned calls are still running.
func (p *pool) zombieCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.zombies
}
