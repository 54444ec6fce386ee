package spool

import "errors"

// ErrFull is returned by Append when storing the events would make the spool
// hold more than Config.MaxBytes. Nothing of the rejected call is stored.
var ErrFull = errors.New("spool full")

// ErrLocked is returned by Open when another process holds the store's file
// lock (typically a running Caddy instance).
var ErrLocked = errors.New("spool locked by another process")

// ErrClosed is returned by operations on a Store after Close.
var ErrClosed = errors.New("spool closed")

// ErrInvalidEvent is wrapped by Append when an event lacks a required field.
var ErrInvalidEvent = errors.New("invalid spool event")
