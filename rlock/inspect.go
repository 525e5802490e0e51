package rlock

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Introspection: who holds a Mutex, who waits for it (Inspect), and which
// Mutexes exist (List). Each grant records its holder's ClientInfo, token
// and request time in the key "<lock>:holder", written by the grant, renewed
// with the lock and deleted with it (see docs/design.md, "Introspection").

// MaxInspectWaiters is the most queued clients Inspect and List return per
// lock; LockInfo.WaitersTotal counts them all.
const MaxInspectWaiters = 100

// ClientInfo describes the latchkey Client that made a grant.
type ClientInfo struct {
	ID   string `json:"id"`             // the Client's ID
	Name string `json:"name,omitempty"` // its Options.ClientName
	Host string `json:"host"`           // os.Hostname of its process
	PID  int    `json:"pid"`            // its process id
}

// describeClient is the ClientInfo a client records with its grants, as
// JSON (compact: it is stored with every grant).
func describeClient(id, name string) (string, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "" // recorded as unknown rather than refusing to lock
	}
	b, err := json.Marshal(ClientInfo{ID: id, Name: name, Host: host, PID: os.Getpid()})
	if err != nil {
		return "", fmt.Errorf("latchkey: describing the client: %w", err)
	}
	return string(b), nil
}

// Holder is a hold on a Mutex.
type Holder struct {
	Owner string // the hold's owner id
	Count int64  // its hold count (re-entries included)
	// Token, Since and Client come from the grant's record; they are zero
	// when the lock has none (a lock written by something else).
	Token  int64      // the grant's fencing token
	Since  time.Time  // when the grant was asked for, by the holder's clock
	Client ClientInfo // who was granted it
}

// Waiter is a client queued for a Mutex (one per client, however many of
// its goroutines wait).
type Waiter struct {
	Client string    // the waiting Client's ID
	Since  time.Time // when it queued, by Redis' clock
}

// LockInfo is what Inspect found of a Mutex.
type LockInfo struct {
	Name    string
	Holders []Holder // empty when the lock is free
	// LeaseLeft is the holder's remaining lease: 0 when free, -1 when the
	// key has no expiry.
	LeaseLeft    time.Duration
	Waiters      []Waiter // oldest first, at most MaxInspectWaiters
	WaitersTotal int      // how many clients are queued
	// ReservedFor is the client a free lock is kept for, for the handoff
	// window after a release woke it; "" for none.
	ReservedFor string
}

// Held reports whether anyone holds the lock.
func (i LockInfo) Held() bool { return len(i.Holders) > 0 }

// Inspect reads the state of the Mutex called name in one round trip,
// changing nothing: its holder with hold count, token, grant time and
// client, the lease left, and the queued clients in order. A lock nobody
// holds or waits for is a LockInfo with no Holders.
func (c *Client) Inspect(ctx context.Context, name string) (LockInfo, error) {
	keys, err := lockKeys(c.opts.Prefix, name)
	if err != nil {
		return LockInfo{}, err
	}
	r, err := luascripts.RunDescribe(ctx, c.rc, keys, MaxInspectWaiters)
	if err != nil {
		return LockInfo{}, fmt.Errorf("latchkey: inspect %q: %w", name, err)
	}
	return lockInfo(name, r), nil
}

func lockInfo(name string, r luascripts.DescribeReply) LockInfo {
	info := LockInfo{Name: name, WaitersTotal: int(r.Queued), ReservedFor: r.Reserved}
	switch {
	case r.PTTL > 0:
		info.LeaseLeft = time.Duration(r.PTTL) * time.Millisecond
	case r.PTTL == -1:
		info.LeaseLeft = -1
	}
	for owner, n := range r.Counts {
		h := Holder{Owner: owner, Count: n}
		if r.Record.Owner == owner {
			h.Token, h.Since = r.Record.Token, r.Record.Since
			// A record this version cannot parse still names the owner.
			_ = json.Unmarshal([]byte(r.Record.About), &h.Client)
		}
		info.Holders = append(info.Holders, h)
	}
	sort.Slice(info.Holders, func(i, j int) bool { return info.Holders[i].Owner < info.Holders[j].Owner })
	for _, q := range r.Queue {
		info.Waiters = append(info.Waiters, Waiter{Client: q.Client, Since: q.Since})
	}
	return info
}

// List finds the Mutexes whose names match pattern (Redis glob syntax; ""
// means "*") that exist now, and inspects each, sorted by name. It SCANs
// the server, or every Cluster master, for "<prefix>:{<pattern>}" hashes
// (never KEYS), so its cost grows with the number of keys in Redis, not
// with the locks found; use it for operations, not on a hot path. A lock released between the SCAN and
// its inspection is left out. Patterns must not contain braces.
func (c *Client) List(ctx context.Context, pattern string) ([]LockInfo, error) {
	if pattern == "" {
		pattern = "*"
	}
	if len(pattern) > MaxNameLen || containsBrace(pattern) {
		return nil, fmt.Errorf("%w: pattern %q must not contain braces (or be over %d bytes)", ErrInvalidName, pattern, MaxNameLen)
	}
	match := globEscape(c.opts.Prefix) + ":{" + pattern + "}"
	names, err := c.scan(ctx, match)
	if err != nil {
		return nil, err
	}
	calls := make([]luascripts.Call, len(names))
	for i, name := range names {
		k := luascripts.NewKeys(c.opts.Prefix + ":{" + name + "}")
		calls[i] = luascripts.Call{Keys: []string{k.Lock, k.Holder, k.Queue, k.Reservation}, Args: []string{fmt.Sprint(MaxInspectWaiters)}}
	}
	var out []LockInfo
	for i, res := range luascripts.Describe.ExecMulti(ctx, c.rc, calls) {
		v, err := res.ToArray()
		if err != nil {
			return nil, fmt.Errorf("latchkey: list: inspect %q: %w", names[i], err)
		}
		r, err := luascripts.ParseDescribe(v)
		if err != nil {
			return nil, fmt.Errorf("latchkey: list: inspect %q: %w", names[i], err)
		}
		if info := lockInfo(names[i], r); info.Held() {
			out = append(out, info)
		}
	}
	return out, nil
}

// scan returns the names of the lock keys matching match on the nodes of
// scanNodes, sorted, each once.
func (c *Client) scan(ctx context.Context, match string) ([]string, error) {
	nodes, err := c.scanNodes(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool)
	for addr, node := range nodes {
		for cursor := uint64(0); ; {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(match).Count(1000).Type("hash").Build()).AsScanEntry()
			if err != nil {
				return nil, scanError(addr, err)
			}
			for _, key := range e.Elements {
				seen[key] = true
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	names := make([]string, 0, len(seen))
	base := len(c.opts.Prefix) + len(":{")
	for key := range seen {
		names = append(names, key[base:len(key)-1])
	}
	sort.Strings(names)
	return names, nil
}

// scanError says which SCAN failed, and what to grant when the ACL refused
// it.
func scanError(addr string, err error) error {
	where := "SCAN"
	if addr != "" {
		where += " on " + addr
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(rerr.Error(), "NOPERM") {
		return fmt.Errorf("latchkey: list: %s: %w (grant the Redis user +scan: see README.md, \"Running as a minimal Redis user\")", where, err)
	}
	return fmt.Errorf("latchkey: list: %s: %w", where, err)
}

// scanNodes returns the nodes List scans, by address: the client's one
// server, or a Cluster's masters. A replica's keys are its master's, so
// scanning it would only add work, and a replica that is down or still
// syncing would fail the List. rueidis knows the nodes but not their roles,
// so the masters come from CLUSTER SLOTS (which rueidis needs too); when
// one of them is not among rueidis' nodes under the same address, every
// node is scanned instead.
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
	host, err := node[0].ToString()
	if err != nil || host == "" || host == "?" { // the node does not know its address
		return "", false
	}
	port, err := node[1].AsInt64()
	if err != nil {
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
