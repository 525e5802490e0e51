package luascripts

import (
	"context"

	"github.com/redis/rueidis"
)

// RWKeys are the keys of one RWMutex, all under its hash tag.
type RWKeys struct {
	Base        string // "<prefix>:{<name>}:rw", which the others extend
	Write       string // the write hold {owner -> count, "#rec" -> its record}
	Readers     string // the read holds {owner -> count}
	ReadLeases  string // the readers' lease set {owner -> the end of its lease, server ms}
	ReadRecords string // the readers' records {owner -> record}
	QueueR      string // waiting readers' clients (QueueEntry), oldest first
	QueueW      string // waiting writers' clients, oldest first
	Fence       string // the writers' fencing counter
}

// NewRWKeys derives an RWMutex's keys from its base key.
func NewRWKeys(base string) RWKeys {
	return RWKeys{Base: base, Write: base + ":w",
		Readers: base + ":rd", ReadLeases: base + ":rd:e", ReadRecords: base + ":rd:rec",
		QueueR: base + ":qr", QueueW: base + ":qw",
		Fence: base + ":fence"}
}

// scripts are the KEYS of every RWMutex script but rwreenter (rwqueue.lua).
func (k RWKeys) scripts() []string {
	return []string{k.Write, k.Readers, k.ReadLeases, k.ReadRecords, k.QueueR, k.QueueW}
}

// ReadKeep is the group of keys a read hold keeps alive (see SemKeys.Keep).
func (k RWKeys) ReadKeep() []string {
	return []string{k.Readers, LeaseSet(k.ReadLeases), k.ReadRecords}
}

// Inbox is the channel on which client's waiting readers (write false) or
// writers (write true) are woken.
func (k RWKeys) Inbox(client string, write bool) string {
	return k.Base + ":ch:" + side(write) + ":" + client
}

// RunRWAcquire runs RWWrite when write, else RWRead; see Keys.Acquire.
// writer, for RWRead, is the write owner the caller holds, or "".
func RunRWAcquire(ctx context.Context, c rueidis.Client, k RWKeys, a AcquireArgs, write bool, writer string) (AcquireReply, error) {
	if write {
		return runAcquire(ctx, c, RWWrite, append(k.scripts(), k.Fence),
			[]string{k.Base, a.Owner, Millis(a.Lease), a.Client, flag(a.Waiter), a.Wake.spec(), recordAbout(a.About)}, a.Sync)
	}
	return runAcquire(ctx, c, RWRead, k.scripts(),
		[]string{k.Base, a.Owner, Millis(a.Lease), a.Client, flag(a.Waiter), writer, a.Wake.spec(), recordAbout(a.About)}, a.Sync)
}

// RunRWReenter runs RWReenter: the reader's new hold count, 0 when its
// read hold is gone.
func RunRWReenter(ctx context.Context, c rueidis.Client, k RWKeys, owner string) (int64, error) {
	return runReenter(ctx, c, RWReenter, []string{k.Readers, k.ReadLeases}, owner)
}

// RunRWUnlock runs RWUnlock on the write hold (write) or a read hold; see
// Keys.Release (it hands over to nobody).
func RunRWUnlock(ctx context.Context, c rueidis.Client, k RWKeys, a ReleaseArgs, write bool) (ReleaseReply, error) {
	return runRelease(ctx, c, RWUnlock, k.scripts(),
		[]string{k.Base, a.Owner, side(write), itoa(a.Count), a.Wake.spec(), flag(a.Retry)}, a.Sync)
}

// side is the rw scripts' argument for the write side ("w") or the read side ("r").
func side(write bool) string {
	if write {
		return "w"
	}
	return "r"
}

// RunRWLeave runs RWLeave for client's reader (write false) or writer entry.
func RunRWLeave(ctx context.Context, c rueidis.Client, k RWKeys, client string, write bool, w Wake) error {
	return RWLeave.Exec(ctx, c, k.scripts(), []string{k.Base, client, w.spec(), side(write)}).Error()
}
