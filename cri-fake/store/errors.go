// Package store keeps cri-fake's sandboxes and containers. The stores own indexing (by ID, by
// unique ID prefix, by reserved name) and locking, and every state transition is a guarded method
// that refuses to move an object out of a state it is not in, so a handler reads like the
// protocol: validate, look up, change state, answer (the shape of containerd's internal/cri/store).
package store

import "errors"

// Typed errors; the runtime handlers turn them into gRPC codes.
var (
	// ErrNotFound: no object with that ID (or ID prefix).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the name is reserved by another object.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalidState: the transition is not allowed from the object's current state.
	ErrInvalidState = errors.New("invalid state")
	// ErrAmbiguous: an ID prefix matches more than one object.
	ErrAmbiguous = errors.New("ambiguous ID prefix")
)
