package main

import "errors"

// Errors of the simulation. They are wrapped with what failed and how to
// fix it; match them with errors.Is.
var (
	// errConfig: a flag or config value is out of range.
	errConfig = errors.New("market: bad configuration")
	// errNotLoopback: -addr names a server that might not be a scratch one.
	// The simulation FLUSHALLs it, so it must be on loopback.
	errNotLoopback = errors.New("market: -addr must be a loopback address")
	// errLockTimeout: a SETNX or latchkey lock stayed busy for the whole
	// acquire timeout.
	errLockTimeout = errors.New("market: lock not acquired within the acquire timeout")
	// errLockNotHeld: releasing a lock found it held by someone else or
	// gone, so the work done under it was not exclusive.
	errLockNotHeld = errors.New("market: lock was not held at release")
	// errInsufficientFunds: a buyer could not afford an item. Buyers start
	// rich enough that this means the funds bookkeeping is broken.
	errInsufficientFunds = errors.New("market: buyer cannot afford the item")
	// errNotInInventory: a seller tried to list an item its inventory does
	// not hold.
	errNotInInventory = errors.New("market: item is not in the seller's inventory")
	// errInvariant: the data left by a run breaks an invariant of the
	// market (money, items, ledger, leftover locks).
	errInvariant = errors.New("market: invariant violated")
)
