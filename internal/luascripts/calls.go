package luascripts

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Keys are the Redis keys of one lock. They all carry the lock's hash tag,
// so on Redis Cluster they share one slot, which every script needs.
type Keys struct {
	// Lock is the hash {owner id -> hold count, "#rec" -> the holder
	// record (record.lua)}, with the lease as its expiry.
	Lock    string
	Channel string // base of the wake-up channels: "<Channel>:<client id>"
	Fence   string // fencing counter, no expiry
	Queue   string // ZSET of waiting clients' QueueEntry, oldest first (queue.lua)
}

// NewKeys derives a lock's keys from its base key "<prefix>:{<name>}".
func NewKeys(base string) Keys {
	return Keys{Lock: base, Channel: base + ":ch", Fence: base + ":fence", Queue: base + ":q"}
}

// Exclusive is an exclusive lock's calls: latchkey's (Keys) or Redisson's
// (RedissonKeys), so that one Mutex side runs either.
type Exclusive interface {
	Acquire(ctx context.Context, c rueidis.Client, a AcquireArgs) (AcquireReply, error)
	Reenter(ctx context.Context, c rueidis.Client, owner string) (int64, error)
	Release(ctx context.Context, c rueidis.Client, a ReleaseArgs) (ReleaseReply, error)
}

// QueueEntry is how client, described by about (ClientInfo JSON, or ""),
// stands in every wait queue: the scripts take it where they take the
// client, and wake "<channel>:<client>". The description rides in the
// entry, so that queueing writes nothing else. client must not contain
// '|' (a UUID does not).
func QueueEntry(client, about string) string { return client + "|" + about }

// Inbox is the channel on which client's waiters for this lock are woken.
func (k Keys) Inbox(client string) string { return k.Channel + ":" + client }

// Wake says how a script wakes waiting clients (queue.lua).
type Wake struct {
	Sharded bool          // SPUBLISH (Redis 7 Cluster) instead of PUBLISH
	Window  time.Duration // how long a woken client keeps its place without coming; 0: for ever
}

// spec is the scripts' wake argument: "p" or "s" and the window in ms.
func (w Wake) spec() string {
	if w.Sharded {
		return "s" + Millis(w.Window)
	}
	return "p" + Millis(w.Window)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// AcquireArgs are the acquire script's arguments.
type AcquireArgs struct {
	Owner  string        // a new owner id
	Lease  time.Duration // > 0
	Client string        // the caller's QueueEntry
	Waiter bool          // queue the client if refused, dequeue it if granted
	Sync   Sync          // replicas to acknowledge a grant
	About  string        // the caller's client description, for the holder record
	Wake   Wake          // how to wake the clients queued before the caller
}

// AcquireKeys are the acquire script's KEYS, in order.
func (k Keys) AcquireKeys() []string {
	return []string{k.Lock, k.Fence, k.Queue}
}

// AcquireArgv is the acquire script's ARGV for a, in order (for batches).
func (k Keys) AcquireArgv(a AcquireArgs) []string {
	return []string{a.Owner, Millis(a.Lease), a.Client, flag(a.Waiter), recordAbout(a.About), a.Wake.spec(), k.Channel}
}

// Acquire runs the acquire script; see runAcquire.
func (k Keys) Acquire(ctx context.Context, c rueidis.Client, a AcquireArgs) (AcquireReply, error) {
	return runAcquire(ctx, c, Acquire, k.AcquireKeys(), k.AcquireArgv(a), a.Sync)
}

// recordAbout is the holder record's tail (record.lua): the time of the
// request by this process' clock (a TIME call would be a fifth of the
// record's cost), and the client's description.
func recordAbout(about string) string {
	return strconv.FormatInt(time.Now().UnixMilli(), 10) + "|" + about
}

// Reenter runs the reenter script; see runReenter.
func (k Keys) Reenter(ctx context.Context, c rueidis.Client, owner string) (int64, error) {
	return runReenter(ctx, c, Reenter, []string{k.Lock}, owner)
}

// runReenter runs one of the re-entry scripts, which all reply owner's new
// hold count, 0 when it holds none.
func runReenter(ctx context.Context, c rueidis.Client, s *Script, keys []string, owner string) (int64, error) {
	n, err := s.Exec(ctx, c, keys, []string{owner}).AsInt64()
	if err == nil && n < 0 {
		err = unexpected(s.Name(), n)
	}
	return n, err
}

// ReleaseArgs are the release script's arguments.
type ReleaseArgs struct {
	Owner     string
	Count     int64         // the owner's hold count before the release
	Heir      string        // a new owner id to hand the lock to at the last hold, or ""
	HeirLease time.Duration // the heir's lease
	HeirAbout string        // the heir's client description, for the holder record
	// HeirCheck: the lock's TTL may exceed HeirLease, so the script reads it
	// and, if so, probes the queue (waiters may have been told that TTL).
	HeirCheck bool
	Wake      Wake
	Retry     bool // an earlier call with these arguments may have run
	Sync      Sync // replicas to acknowledge the release
}

// Release runs the release script; see runRelease.
func (k Keys) Release(ctx context.Context, c rueidis.Client, a ReleaseArgs) (ReleaseReply, error) {
	args := []string{a.Owner, strconv.FormatInt(a.Count, 10), a.Wake.spec(), flag(a.Retry)}
	if a.Heir != "" {
		args = append(args, a.Heir, Millis(a.HeirLease), recordAbout(a.HeirAbout), flag(a.HeirCheck))
	}
	return runRelease(ctx, c, Release, k.releaseKeys(), args, a.Sync)
}

// releaseKeys are the release script's KEYS, in order.
func (k Keys) releaseKeys() []string {
	return []string{k.Lock, k.Channel, k.Fence, k.Queue}
}

// RunLeave runs the leave script for client; it reports whether client
// was queued.
func RunLeave(ctx context.Context, c rueidis.Client, k Keys, client string, w Wake) (bool, error) {
	n, err := Leave.Exec(ctx, c, []string{k.Lock, k.Channel, k.Queue},
		[]string{client, w.spec()}).AsInt64()
	return n == 1, err
}

// leaseSetMark starts a kept key that LeaseSet marked (no key latchkey
// builds starts with a NUL byte).
const leaseSetMark = "\x00lease set\x00"

// LeaseSet marks key, among the keys that follow a group's first, as the
// group's lease set: a sorted set {owner -> the end of its lease, server
// ms} (leases.lua). The renew script then counts the group as held only
// while the owner's score has not passed, and moves it out with the keys'
// expiries. The mark is taken off before the key is sent.
func LeaseSet(key string) string { return leaseSetMark + key }

// AppendRenew adds one group of kept keys to a renew call, whose Args
// start with the lease: first, a hash in which owner holds a field, and
// the keys that follow it (LeaseSet's among them).
func (c *Call) AppendRenew(owner, first string, follow ...string) {
	c.Keys = append(c.Keys, first)
	c.Args = append(c.Args, owner)
	for _, k := range follow {
		arg := "" // renewed when first is held (renew.lua)
		if key, ok := strings.CutPrefix(k, leaseSetMark); ok {
			k, arg = key, "#lease"
		}
		c.Keys = append(c.Keys, k)
		c.Args = append(c.Args, arg)
	}
}

// RunRenewHold runs the renew script for one hold's groups of keys (as
// AppendRenew's). It reports whether owner still holds every group, whose
// keys' expiries are then at least lease; a renewal that y's replicas did
// not acknowledge comes with a *NotReplicatedError.
func RunRenewHold(ctx context.Context, c rueidis.Client, keep [][]string, owner string, lease time.Duration, y Sync) (bool, error) {
	call := Call{Args: []string{Millis(lease)}}
	for _, g := range keep {
		call.AppendRenew(owner, g[0], g[1:]...)
	}
	res, notSynced := Renew.ExecSync(ctx, c, call.Keys, call.Args, y)
	v, err := res.AsIntSlice()
	if err != nil {
		return false, err
	}
	held, err := ParseRenew(v, len(call.Keys))
	if err != nil {
		return false, err
	}
	return !slices.Contains(held, false), notSynced
}
