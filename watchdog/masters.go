package watchdog

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// mastersRefresh is how often the watchdog reads the Cluster's slot map
// again. It only groups renewals (rueidis routes every call), so a map a
// slot migration made stale costs a group that waits for two masters, not
// a renewal.
const mastersRefresh = time.Minute

// masters says which master serves each Cluster slot, as CLUSTER SLOTS last
// said, so that a chunk's renewals go to each master as a request of its
// own (see Watchdog.groups).
type masters struct {
	of atomic.Pointer[[clusterSlots]int32] // slot -> its master's number, -1 none; nil until read

	mu     sync.Mutex
	asking bool      // a read is under way
	next   time.Time // when to read again
}

// refreshMasters reads the slot map in the background when it is due, on a
// Cluster. A read that fails (rueidis sent it to a master that does not
// answer, say) leaves the map as it was and is tried again an interval
// later; until one succeeds, each chunk is one request.
func (w *Watchdog) refreshMasters(now time.Time) {
	if w.client.Mode() != rueidis.ClientModeCluster {
		return
	}
	m := &w.masters
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.asking || now.Before(m.next) {
		return
	}
	m.asking = true
	w.ticks.Go(func() {
		ctx, cancel := context.WithTimeout(w.ctx, w.opts.Interval)
		of, err := readMasters(ctx, w.client)
		cancel()
		m.mu.Lock()
		defer m.mu.Unlock()
		m.asking = false
		if err != nil {
			m.next = time.Now().Add(w.opts.Interval)
			if l := w.opts.Logger; l != nil && w.ctx.Err() == nil {
				l.Warn("latchkey: reading the Cluster's slot map failed; retrying", "error", err)
			}
			return
		}
		m.of.Store(of)
		m.next = time.Now().Add(mastersRefresh)
	})
}

// readMasters numbers the masters of CLUSTER SLOTS' reply (one range is
// {first slot, last slot, {host, port, id, ...}, replicas...}) and maps
// each slot to its master's number.
func readMasters(ctx context.Context, c rueidis.Client) (*[clusterSlots]int32, error) {
	ranges, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	var of [clusterSlots]int32
	for i := range of {
		of[i] = -1
	}
	number := make(map[string]int32)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: a range of %d fields: %w", len(f), err)
		}
		first, err1 := f[0].AsInt64()
		last, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || first < 0 || last >= clusterSlots || first > last {
			return nil, fmt.Errorf("CLUSTER SLOTS: unreadable range %v", f)
		}
		// The node's id names it however its endpoint is announced; a
		// Redis too old to send it is named by its endpoint.
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		name := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		if len(node) > 2 {
			if id, err := node[2].ToString(); err == nil && id != "" {
				name = id
			}
		}
		n, ok := number[name]
		if !ok {
			n = int32(len(number))
			number[name] = n
		}
		for s := first; s <= last; s++ {
			of[s] = n
		}
	}
	return &of, nil
}
