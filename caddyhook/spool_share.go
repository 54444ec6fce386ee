package caddyhook

import (
	"errors"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/succession"
)

// spoolShare is a spool in sharedPool with the senders of the handlers
// that use it, oldest first (a succession.Line). Only the oldest
// delivers: during a reload that is the running config's, and when the
// new config is refused, its registration goes away without the spool
// ever having used it. When the old config is cleaned up, the next one
// takes over the delivery.
type spoolShare struct {
	store  *spool.Store   // the local spool (nil for the cluster queue)
	target deliveryTarget // where the delivering registration goes: store or the cluster queue
	line   *succession.Line[*spoolReg]
	// tracker records this node's deliveries (the delivery health),
	// whichever registration delivers: it outlives a reload as the spool does
	tracker *cluster.DeliveryTracker
}

// spoolReg is one handler's registration with a spoolShare: its sender,
// its delivery rate and its config's spool settings.
type spoolReg struct {
	share    *spoolShare
	sender   spool.Sender
	rate     spool.Rate
	settings *spool.Config   // a local spool's settings (nil: the cluster queue's are the engine's)
	config   <-chan struct{} // Done of the registering config's context: tells configs apart
	place    *succession.Registration[*spoolReg]
}

// deliveryTarget is what a spoolShare hands its delivering sender to.
type deliveryTarget interface {
	SetSender(spool.Sender)
	SetRate(spool.Rate)
}

// newSpoolShare shares a local spool.
func newSpoolShare(st *spool.Store) *spoolShare { return newShare(st, st) }

// newShare shares the delivery to target (of the local spool st, or of
// the cluster queue when st is nil).
func newShare(st *spool.Store, target deliveryTarget) *spoolShare {
	p := &spoolShare{store: st, target: target, tracker: &cluster.DeliveryTracker{}}
	p.line = succession.New((*spoolReg).activate, func() { p.target.SetSender(nil) })
	return p
}

// deliveries is what records this node's deliveries.
func (p *spoolShare) deliveries() *cluster.DeliveryTracker { return p.tracker }

// localStore is the local spool shared (nil for the cluster queue).
func (p *spoolShare) localStore() *spool.Store { return p.store }

// delivery is where the delivering registration's sender goes.
func (p *spoolShare) delivery() deliveryTarget { return p.target }

// activate makes r the registration the spool delivers with, under its
// config's settings: the spool outlives a reload, and this is where the
// new config's max_bytes, max_age, retries and workers take over from the
// old one's (a refused config never gets here).
func (r *spoolReg) activate() {
	if r.share.store != nil && r.settings != nil {
		r.share.store.Reconfigure(*r.settings)
	}
	r.share.target.SetSender(r.share.tracker.Wrap(r.sender))
	r.share.target.SetRate(r.rate)
}

// register adds snd (delivering at rate, under settings) as the newest
// sender. A second handler of the same config (same config context) is
// refused: its events would be delivered through the first one's gateway.
func (p *spoolShare) register(snd spool.Sender, rate spool.Rate, settings *spool.Config, config <-chan struct{}) (*spoolReg, error) {
	r := &spoolReg{share: p, sender: snd, rate: rate, settings: settings, config: config}
	r.place = p.line.Register(r, func(e *spoolReg) bool { return e.config == config })
	if r.place == nil {
		return nil, errors.New("already used by another hooks handler of this config; give each handler its own spool directory")
	}
	return r, nil
}

// release removes the registration; when it was the delivering one, the
// next oldest takes over (or delivery pauses until one registers). It
// may run more than once.
func (r *spoolReg) release() { r.place.Release() }

// Destruct closes the spool (stops the cluster queue's delivery here)
// when its last user is gone.
func (p *spoolShare) Destruct() error {
	if p.store == nil {
		p.target.SetSender(nil)
		return nil
	}
	return p.store.Close()
}
