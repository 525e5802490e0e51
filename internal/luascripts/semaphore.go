package luascripts

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"
)

// SemKeys are the keys of one Semaphore, all under its hash tag.
type SemKeys struct {
	Base    string // "<prefix>:{<name>}:sem", which the others extend
	Holders string // {owner -> permits}, "#size" and "#held" (the permits held)
	Leases  string // the holders' lease set {owner -> the end of its lease, server ms}
	Records string // the holders' records {owner -> record}
	Queue   string // waiting clients (QueueEntry), oldest first
	Wants   string // {client -> permits its contender wants}
}

// NewSemKeys derives a Semaphore's keys from its base key.
func NewSemKeys(base string) SemKeys {
	return SemKeys{Base: base, Holders: base + ":h", Leases: base + ":h:e", Records: base + ":h:rec",
		Queue: base + ":q", Wants: base + ":qn"}
}

// Keep is the group of keys a hold keeps alive (renew.lua): the holders,
// in which its owner has a field, their lease set and their records.
func (k SemKeys) Keep() []string { return []string{k.Holders, LeaseSet(k.Leases), k.Records} }

// Inbox is the channel on which client's waiters are woken.
func (k SemKeys) Inbox(client string) string { return k.Base + ":ch:" + client }

// all are the KEYS of every Semaphore script (semqueue.lua).
func (k SemKeys) all() []string {
	return []string{k.Holders, k.Leases, k.Records, k.Queue, k.Wants}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// RunSemAcquire runs SemAcquire for n permits (1..size) of a semaphore of
// size; see Keys.Acquire (the reply's Size reports a semaphore in use with
// another size).
func RunSemAcquire(ctx context.Context, c rueidis.Client, k SemKeys, a AcquireArgs, n, size int64) (AcquireReply, error) {
	return runAcquire(ctx, c, SemAcquire, k.all(), []string{k.Base, a.Owner, itoa(n), itoa(size),
		Millis(a.Lease), a.Client, flag(a.Waiter), a.Wake.spec(), recordAbout(a.About)}, a.Sync)
}

// RunSemRelease runs SemRelease; see Keys.Release (Left is 0 when released,
// -1 when the owner held no permits). size is the caller's, for when the
// recorded one is gone.
func RunSemRelease(ctx context.Context, c rueidis.Client, k SemKeys, a ReleaseArgs, size int64) (ReleaseReply, error) {
	return runRelease(ctx, c, SemRelease, k.all(), []string{k.Base, a.Owner, itoa(size), a.Wake.spec(), flag(a.Retry)}, a.Sync)
}

// RunSemLeave runs SemLeave for client; it reports whether client was queued.
func RunSemLeave(ctx context.Context, c rueidis.Client, k SemKeys, client string, size int64, w Wake) (bool, error) {
	n, err := SemLeave.Exec(ctx, c, k.all(), []string{k.Base, client, itoa(size), w.spec()}).AsInt64()
	return n == 1, err
}

// RunSemAvailable runs SemAvailable: the free permits, or, when the
// semaphore is in use with another size, that size (and free 0).
func RunSemAvailable(ctx context.Context, c rueidis.Client, k SemKeys, size int64) (free, recorded int64, err error) {
	v, err := SemAvailable.Exec(ctx, c, k.all(), []string{itoa(size)}).AsIntSlice()
	if err != nil {
		return 0, 0, err
	}
	switch {
	case len(v) == 2 && v[0] >= 0 && v[0] <= size && v[1] == 0:
		return v[0], 0, nil
	case len(v) == 2 && v[0] == -1 && v[1] > 0 && v[1] != size:
		return 0, v[1], nil
	}
	return 0, 0, unexpected("semavailable", v)
}
