package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SlotRange is a run of hash slots, both ends included.
type SlotRange struct{ Start, End int }

func (r SlotRange) String() string { return fmt.Sprintf("%d-%d", r.Start, r.End) }

// Contains reports whether slot is in r.
func (r SlotRange) Contains(slot int) bool { return r.Start <= slot && slot <= r.End }

// Shard is one master of a Cluster as some node sees it: the slots it serves
// and its replicas. Addresses are "127.0.0.1:port".
type Shard struct {
	Master   string
	MasterID string
	Slots    []SlotRange
	// Replicas are the nodes replicating Master that are not marked failed,
	// sorted by address.
	Replicas []string
}

// nodeEntry is one line of CLUSTER NODES.
type nodeEntry struct {
	id, addr string
	flags    []string
	masterID string // "" for a master
	linkUp   bool
	// slots leaves out the "[slot->-id]" and "[slot-<-id]" markers of a
	// migration in progress, which only the two nodes involved show.
	slots []SlotRange
}

func (e nodeEntry) has(flag string) bool { return slices.Contains(e.flags, flag) }

func (e nodeEntry) master() bool { return e.has("master") }

// healthy is false for nodes that a client routed to would fail on, or
// that the cluster has not fully accepted yet.
func (e nodeEntry) healthy() bool {
	for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
		if e.has(bad) {
			return false
		}
	}
	return e.linkUp
}

// parseNodes parses CLUSTER NODES output:
// id addr@cport[,hostname] flags master ping-sent pong-recv epoch link slot...
func parseNodes(s string) []nodeEntry {
	var out []nodeEntry
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		e := nodeEntry{id: f[0], flags: strings.Split(f[2], ","), linkUp: f[7] == "connected"}
		e.addr, _, _ = strings.Cut(f[1], "@")
		if f[3] != "-" {
			e.masterID = f[3]
		}
		for _, sl := range f[8:] {
			if strings.HasPrefix(sl, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(sl, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil {
				e.slots = append(e.slots, SlotRange{a, b})
			}
		}
		out = append(out, e)
	}
	return out
}

// clusterNodes asks addr for its view of the cluster.
func clusterNodes(ctx context.Context, addr string) ([]nodeEntry, error) {
	v, err := command(ctx, addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("redistest: CLUSTER NODES on %s: %w", addr, err)
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("redistest: CLUSTER NODES on %s answered %T", addr, v)
	}
	return parseNodes(s), nil
}

// shardsOf turns one node's view into shards: healthy masters, sorted by
// their first slot (masters without slots last, by address).
func shardsOf(view []nodeEntry) []Shard {
	var shards []Shard
	for _, m := range view {
		if !m.master() || m.has("fail") || m.has("noaddr") || m.has("handshake") {
			continue
		}
		sh := Shard{Master: m.addr, MasterID: m.id, Slots: m.slots}
		for _, r := range view {
			if r.masterID == m.id && !r.has("fail") && !r.has("noaddr") {
				sh.Replicas = append(sh.Replicas, r.addr)
			}
		}
		slices.Sort(sh.Replicas)
		shards = append(shards, sh)
	}
	slices.SortFunc(shards, func(a, b Shard) int {
		switch {
		case len(a.Slots) == 0 && len(b.Slots) == 0:
			return strings.Compare(a.Master, b.Master)
		case len(a.Slots) == 0:
			return 1
		case len(b.Slots) == 0:
			return -1
		}
		return a.Slots[0].Start - b.Slots[0].Start
	})
	return shards
}

// byAddr finds the entry for addr in a view.
func byAddr(view []nodeEntry, addr string) (nodeEntry, bool) {
	for _, e := range view {
		if e.addr == addr {
			return e, true
		}
	}
	return nodeEntry{}, false
}

// byID finds the entry for id in a view.
func byID(view []nodeEntry, id string) (nodeEntry, bool) {
	for _, e := range view {
		if e.id == id {
			return e, true
		}
	}
	return nodeEntry{}, false
}
