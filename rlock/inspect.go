package rlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// MaxInspectWaiters is the most queued clients Inspect and List return per
// lock (per queue, for an RWMutex); LockInfo.WaitersTotal counts them all.
const MaxInspectWaiters = 100

// Kind is the kind of lock a LockInfo describes.
type Kind string

// The kinds of lock Inspect and List describe. The spin variants share
// their kind's keys, so they are the same kind.
const (
	KindMutex     Kind = "mutex"
	KindRWMutex   Kind = "rwmutex"
	KindSemaphore Kind = "semaphore"
)

// ClientInfo describes a latchkey Client: the one that made a grant, or
// one that waits.
type ClientInfo struct {
	ID   string `json:"id"`             // the Client's ID
	Name string `json:"name,omitempty"` // its Options.ClientName
	Host string `json:"host"`           // os.Hostname of its process
	PID  int    `json:"pid"`            // its process id
}

// describeClient is the ClientInfo a client records with its grants, as
// compact JSON.
func describeClient(id, name string) string {
	host, _ := os.Hostname() // "" (unknown) rather than refusing to lock
	// A struct of strings and an int always marshals.
	b, _ := json.Marshal(ClientInfo{ID: id, Name: name, Host: host, PID: os.Getpid()})
	return string(b)
}

// Holder is a hold on a lock.
type Holder struct {
	Owner   string // the hold's owner id
	Mode    string // an RWMutex hold's: ModeRead or ModeWrite; else ""
	Count   int64  // its hold count (re-entries included); 1 for a Semaphore's
	Permits int64  // a Semaphore holder's permits, else 0
	// LeaseLeft is this hold's remaining lease; -1 when it has no expiry.
	LeaseLeft time.Duration
	// Token, Since and Client come from the grant's record, zero when there
	// is none (a hold written by something else). Only a Mutex and an
	// RWMutex's write hold have a Token.
	Token  int64      // the grant's fencing token
	Since  time.Time  // when the grant was asked for, by the holder's clock
	Client ClientInfo // who was granted it
}

// The modes of an RWMutex's holders and waiters.
const (
	ModeRead  = "read"
	ModeWrite = "write"
)

// Waiter is a client queued for a lock (one per client and mode, however
// many of its goroutines wait).
type Waiter struct {
	Client ClientInfo // its ID always, the rest when it recorded them
	Since  time.Time  // when it queued, by Redis' clock; zero once woken
	// Woken is when the wake window of a woken client ends, by Redis'
	// clock (it keeps its place until then); zero when it was not woken.
	Woken   time.Time
	Mode    string // an RWMutex waiter's: ModeRead or ModeWrite; else ""
	Permits int64  // what a Semaphore waiter waits for, else 0
}

// LockInfo is what Inspect found of a lock.
type LockInfo struct {
	Name    string
	Kind    Kind
	Holders []Holder // empty when the lock is free; a Mutex has one at most
	// LeaseLeft is the longest of the holders' leases: 0 when free, -1 when
	// a hold has no expiry.
	LeaseLeft    time.Duration
	Size         int64    // a Semaphore's permits (0 when nobody holds or waits), else 0
	Waiters      []Waiter // oldest first, at most MaxInspectWaiters (per mode)
	WaitersTotal int      // how many clients are queued
	// ReservedFor is a woken client whose wake window is open, for which
	// the free lock is kept; "" for none.
	ReservedFor string
	// Damaged says what of the lock's state is not latchkey's and could not
	// be read, "" when nothing; the rest is described. List lists a damaged
	// lock even when free. ForceUnlock refuses it (ErrWrongType) when a
	// key is not latchkey's, such as a hold count that is not an integer,
	// and clears it when only a holder record is damaged.
	Damaged string
}

// Held reports whether anyone holds the lock.
func (i LockInfo) Held() bool { return len(i.Holders) > 0 }

// Inspect reads the state of the Mutex called name in one round trip,
// changing nothing: its holder with hold count, token, grant time and
// client, the lease left, and the queued clients in order. A lock nobody
// holds or waits for is a LockInfo with no Holders.
func (c *Client) Inspect(ctx context.Context, name string) (LockInfo, error) {
	return c.inspect(ctx, KindMutex, name)
}

// InspectRWMutex is Inspect for an RWMutex: its write or read holds and
// its queued readers and writers, each with its Mode.
func (c *Client) InspectRWMutex(ctx context.Context, name string) (LockInfo, error) {
	return c.inspect(ctx, KindRWMutex, name)
}

// InspectSemaphore is Inspect for a Semaphore: its holders with their
// permits, its Size, and its queued clients with the permits they want.
func (c *Client) InspectSemaphore(ctx context.Context, name string) (LockInfo, error) {
	return c.inspect(ctx, KindSemaphore, name)
}

func (c *Client) inspect(ctx context.Context, kind Kind, name string) (LockInfo, error) {
	in, err := c.introOf(kind, name)
	if err := ready(ctx, err); err != nil {
		return LockInfo{}, err
	}
	script, call := in.Describe(MaxInspectWaiters)
	info, err := describedInfo(kind, name, script.Exec(ctx, c.rc, call.Keys, call.Args))
	if err != nil {
		return LockInfo{}, fmt.Errorf("latchkey: inspect %s %q: %w", kind, name, err)
	}
	return info, nil
}

// ForceUnlock deletes the Mutex called name whoever holds it, drops a
// woken client that has not come, and wakes the next waiter as a release
// would. It reports whether it deleted a hold, or the open wake window of
// a client for which the free lock was kept: dropping only windows that
// passed is no force-unlock, nor counted as one. When a key of the lock
// is not latchkey's it returns ErrWrongType and deletes nothing: a key of
// another type, or a hash (or lease set) not of a lock's shape, whose
// fields are owner ids ("<UUID>:<n>") with integer hold counts, beside
// the lock's own '#' fields. An application's hash under a wrong
// Options.Prefix, or a Redisson RMap or RReadWriteLock under a name with
// ProtocolRedisson, is left alone. It reads every key it would delete:
// O(holders).
// The former holder learns of it at its next watchdog renewal
// (ErrLockLost), or not at all with a fixed lease: it is for recovery. The
// observers of the Election of that name are told at once, as after Resign.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	return c.forceUnlock(ctx, KindMutex, name)
}

// ForceUnlockRWMutex is ForceUnlock for an RWMutex: it deletes the write
// hold and every read hold. Readers whose lease ran out are not counted as
// something to delete: they hold nothing.
func (c *Client) ForceUnlockRWMutex(ctx context.Context, name string) (bool, error) {
	return c.forceUnlock(ctx, KindRWMutex, name)
}

// ForceUnlockSemaphore is ForceUnlock for a Semaphore: it deletes every
// holder's permits. Holders whose lease ran out are not counted as
// something to delete: they hold nothing.
func (c *Client) ForceUnlockSemaphore(ctx context.Context, name string) (bool, error) {
	return c.forceUnlock(ctx, KindSemaphore, name)
}

func (c *Client) forceUnlock(ctx context.Context, kind Kind, name string) (bool, error) {
	in, err := c.introOf(kind, name)
	if err := ready(ctx, err); err != nil {
		return false, err
	}
	ok, foreign, err := in.ForceUnlock(ctx, c.rc, c.wake)
	switch {
	case err != nil:
		return false, fmt.Errorf("latchkey: force-unlock %s %q: %w", kind, name, err)
	case foreign != "":
		return false, fmt.Errorf("latchkey: force-unlock %s %q: %w: %q is not latchkey's, nothing was deleted (check the name, the kind and the prefix)",
			kind, name, ErrWrongType, foreign)
	case ok:
		c.obs.add(forceUnlocks, kindMetrics[kind], name, 1, plain)
	}
	return ok, nil
}

// kindMetrics is each kind's metric attribute for what ends every hold of
// it (an RWMutex's write side).
var kindMetrics = map[Kind]lockKind{KindMutex: kindMutex, KindRWMutex: kindWrite, KindSemaphore: kindSemaphore}

// intro is the introspection of kind's lock whose Mutex keys are keys.
func intro(kind Kind, keys luascripts.Keys) luascripts.Intro {
	switch kind {
	case KindRWMutex:
		return rwKeys(keys).Intro()
	case KindSemaphore:
		return semKeys(keys).Intro()
	}
	return keys.Intro()
}

// infoOf is the LockInfo of kind's lock name that d describes: holders
// sorted by mode (writers first) and owner, waiters in queueing order (the
// scripts admit by it, across an RWMutex's two queues too).
func infoOf(kind Kind, name string, d luascripts.Described) LockInfo {
	info := LockInfo{Name: name, Kind: kind, Size: d.Size, ReservedFor: d.Woken, Damaged: strings.Join(d.Damaged, "; ")}
	for _, hd := range d.Holds {
		h := Holder{Owner: hd.Owner, Mode: hd.Mode, Count: hd.Count, LeaseLeft: leaseLeft(hd.PTTL)}
		if kind == KindSemaphore {
			h.Count, h.Permits = 1, hd.Count
		}
		if hd.Record.Owner == hd.Owner {
			h.Token, h.Since = hd.Record.Token, hd.Record.Since
			// A description this version cannot parse still names the owner.
			_ = json.Unmarshal([]byte(hd.Record.About), &h.Client)
		}
		if info.LeaseLeft >= 0 && (h.LeaseLeft < 0 || h.LeaseLeft > info.LeaseLeft) {
			info.LeaseLeft = h.LeaseLeft
		}
		info.Holders = append(info.Holders, h)
	}
	sort.Slice(info.Holders, func(i, j int) bool {
		a, b := info.Holders[i], info.Holders[j]
		return a.Mode != b.Mode && a.Mode == ModeWrite || a.Mode == b.Mode && a.Owner < b.Owner
	})
	for _, q := range d.Queues {
		info.WaitersTotal += int(q.Total)
		for _, e := range q.Clients {
			w := Waiter{Since: e.Since, Woken: e.Woken, Mode: q.Mode, Permits: e.Want}
			_ = json.Unmarshal([]byte(e.About), &w.Client) // best effort, as a holder's
			w.Client.ID = e.Client                         // the queue's word, whatever the description says
			info.Waiters = append(info.Waiters, w)
		}
	}
	sort.SliceStable(info.Waiters, func(i, j int) bool { return info.Waiters[i].Since.Before(info.Waiters[j].Since) })
	return info
}

// leaseLeft converts a PTTL: -1ms ("no expiry") is -1, a missing key 0.
func leaseLeft(pttl time.Duration) time.Duration {
	switch {
	case pttl == -time.Millisecond:
		return -1
	case pttl < 0:
		return 0
	}
	return pttl
}

// List inspects every held (or damaged) lock of every kind whose name
// matches pattern (Redis glob syntax; "" means "*"), sorted by name, then
// kind. It SCANs the server, or every Cluster master, so its cost grows
// with the number of keys in Redis: use it for operations, not on a hot
// path. A lock released between the SCAN and its inspection is left out.
// Patterns must not contain braces.
func (c *Client) List(ctx context.Context, pattern string) ([]LockInfo, error) {
	if pattern == "" {
		pattern = "*"
	}
	err := c.latchkeyOnly("List") // it cannot tell a Redisson lock from any hash
	if perr := ValidatePattern(pattern); perr != nil {
		err = perr
	}
	if err := ready(ctx, err); err != nil {
		return nil, err
	}
	found, err := c.scan(ctx, globEscape(c.opts.Prefix)+":{"+pattern+"}*")
	if err != nil {
		return nil, err
	}
	var out []LockInfo
	for _, kind := range []Kind{KindMutex, KindRWMutex, KindSemaphore} {
		names := found[kind]
		script, calls := luascripts.Describe, make([]luascripts.Call, len(names))
		for i, name := range names {
			script, calls[i] = intro(kind, luascripts.NewKeys(c.opts.Prefix+":{"+name+"}")).Describe(MaxInspectWaiters)
		}
		for i, res := range script.ExecMulti(ctx, c.rc, calls) {
			if luascripts.IsTryAgain(res.Error()) {
				// Its slot is half-migrated: Exec retries, as for Inspect,
				// until the migration or ctx ends.
				res = script.Exec(ctx, c.rc, calls[i].Keys, calls[i].Args)
			}
			info, err := describedInfo(kind, names[i], res)
			if err != nil {
				return nil, fmt.Errorf("latchkey: list: inspect %s %q: %w", kind, names[i], err)
			}
			if info.Held() || info.Damaged != "" {
				out = append(out, info)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// describedInfo reads one describe reply. A WRONGTYPE is damage to report,
// not a failure: it concerns this lock alone.
func describedInfo(kind Kind, name string, res rueidis.RedisResult) (LockInfo, error) {
	v, err := res.ToArray()
	if wt := (*luascripts.WrongTypeError)(nil); errors.As(err, &wt) {
		return LockInfo{Name: name, Kind: kind, Damaged: "a key of the lock holds another type: " + wt.Err.Error()}, nil
	}
	if err != nil {
		return LockInfo{}, err
	}
	d, err := luascripts.ParseDescribe(v)
	return infoOf(kind, name, d), err
}

// kindSuffixes tells a lock's kind by what follows "<prefix>:{<name>}" in
// a key its describe script reads: every key of the lock but its fencing
// counter, which outlives it. A lock found by any of them is described, so
// that a free one with a key of another type is listed as damaged.
var kindSuffixes = func() map[string]Kind {
	m := make(map[string]Kind)
	for _, kind := range []Kind{KindMutex, KindRWMutex, KindSemaphore} {
		_, call := intro(kind, luascripts.NewKeys("")).Describe(1)
		for _, key := range call.Keys {
			m[key] = kind
		}
	}
	return m
}()

// scan returns the names of the locks of which a kindSuffixes key matches
// match, by kind, sorted, each once. Not TYPE hash: it would hide a key of
// another type, and save Redis no work (it filters what MATCH let
// through); the fencing counters it lets through are dropped here.
func (c *Client) scan(ctx context.Context, match string) (map[Kind][]string, error) {
	nodes, err := c.scanNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[Kind][]string)
	base := len(c.opts.Prefix) + len(":{")
	for addr, node := range nodes {
		for cursor := uint64(0); ; {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(match).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, scanError(addr, err)
			}
			for _, key := range e.Elements {
				// Names hold no brace, so the first '}' ends the name.
				end := strings.IndexByte(key[base:], '}')
				if kind, ok := kindSuffixes[key[base+end+1:]]; ok && end >= 0 {
					out[kind] = append(out[kind], key[base:base+end])
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	for kind, names := range out {
		slices.Sort(names)
		out[kind] = slices.Compact(names) // a lock has several keys; nodes may repeat keys
	}
	return out, nil
}

// scanError says which SCAN failed, and what to grant when the ACL refused
// it.
func scanError(addr string, err error) error {
	where := "SCAN"
	if addr != "" {
		where += " on " + addr
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(rerr.Error(), "NOPERM") {
		return fmt.Errorf("latchkey: list: %s: %w (grant the Redis user +scan: see docs/operations.md, \"Running as a minimal Redis user\")", where, err)
	}
	return fmt.Errorf("latchkey: list: %s: %w", where, err)
}

// scanNodes returns the nodes List scans, by address: the one server, or a
// Cluster's masters from CLUSTER SLOTS (a replica only adds work, or fails
// when down or syncing); every node when a master is not among rueidis'.
func (c *Client) scanNodes(ctx context.Context) (map[string]rueidis.Client, error) {
	if c.rc.Mode() != rueidis.ClientModeCluster {
		return map[string]rueidis.Client{"": c.rc}, nil
	}
	nodes := c.rc.Nodes()
	ranges, err := c.rc.Do(ctx, c.rc.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("latchkey: list: CLUSTER SLOTS: %w", err)
	}
	masters := make(map[string]rueidis.Client)
	for _, r := range ranges {
		addr, ok := slotsMaster(r)
		node, known := nodes[addr]
		if !ok || !known {
			return nodes, nil
		}
		masters[addr] = node
	}
	return masters, nil
}

// slotsMaster returns the address of the master in one range of a CLUSTER
// SLOTS reply: {first slot, last slot, {host, port, ...}, replicas...}.
func slotsMaster(r rueidis.RedisMessage) (string, bool) {
	f, err := r.ToArray()
	if err != nil || len(f) < 3 {
		return "", false
	}
	node, err := f[2].ToArray()
	if err != nil || len(node) < 2 {
		return "", false
	}
	host, _ := node[0].ToString()
	port, err := node[1].AsInt64()
	if err != nil || host == "" || host == "?" { // "?": the node does not know its address
		return "", false
	}
	return net.JoinHostPort(host, strconv.FormatInt(port, 10)), true
}

// globEscape quotes the glob characters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
