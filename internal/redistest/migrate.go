package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// migrateBatch is how many keys one MIGRATE moves.
const migrateBatch = 100

// migrateTimeout is MIGRATE's timeout in milliseconds, for the transfer of
// one batch between two loopback nodes.
const migrateTimeout = "5000"

// Migration is a slot being moved between masters, begun by BeginMigration.
// Until Finish, the slot is MIGRATING on From and IMPORTING on To: From
// still serves the keys it has, and answers a command on a key it no longer
// has with -ASK To, so clients retry that one command on To with ASKING.
type Migration struct {
	Slot     int
	From, To string

	c            *Cluster
	fromID, toID string
}

// MigrateSlot moves slot and its keys to the master at toAddr, the way
// redis-cli --cluster reshard does, and returns once every node agrees
// that toAddr serves it. Clients that still route the slot to the old
// master get -MOVED.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, toAddr string) error {
	m, err := c.BeginMigration(ctx, slot, toAddr)
	if err != nil {
		return err
	}
	return m.Finish(ctx)
}

// BeginMigration starts moving slot to the master at toAddr: CLUSTER
// SETSLOT IMPORTING on toAddr, then MIGRATING on the master serving it now,
// and moves no key. A test acts on the half-moved slot, moving keys with
// MoveKeys, then calls Finish.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, toAddr string) (*Migration, error) {
	if slot < 0 || slot >= totalSlots {
		return nil, fmt.Errorf("redistest: slot %d out of 0..%d", slot, totalSlots-1)
	}
	from, err := c.MasterOf(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == toAddr {
		return nil, fmt.Errorf("redistest: slot %d is already served by %s", slot, toAddr)
	}
	if _, err := c.shardOf(ctx, toAddr); err != nil {
		return nil, err
	}
	m := &Migration{Slot: slot, From: from, To: toAddr, c: c}
	if m.fromID, err = nodeID(ctx, from); err != nil {
		return nil, err
	}
	if m.toID, err = nodeID(ctx, toAddr); err != nil {
		return nil, err
	}
	// The target first: a client sent there by an -ASK from the source
	// must find it importing.
	if err := m.setSlot(ctx, toAddr, "IMPORTING", m.fromID); err != nil {
		return nil, err
	}
	if err := m.setSlot(ctx, from, "MIGRATING", m.toID); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Migration) setSlot(ctx context.Context, addr string, args ...string) error {
	full := append([]string{"CLUSTER", "SETSLOT", strconv.Itoa(m.Slot)}, args...)
	if _, err := command(ctx, addr, full...); err != nil {
		return fmt.Errorf("redistest: %s on %s: %w", strings.Join(full, " "), addr, err)
	}
	return nil
}

// MoveKeys moves up to max of the slot's keys (all when max <= 0) from From
// to To with MIGRATE ... REPLACE KEYS, and returns how many it moved.
func (m *Migration) MoveKeys(ctx context.Context, max int) (int, error) {
	host, port, _ := net.SplitHostPort(m.To)
	moved := 0
	for max <= 0 || moved < max {
		n := migrateBatch
		if max > 0 {
			n = min(n, max-moved)
		}
		v, err := command(ctx, m.From, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(m.Slot), strconv.Itoa(n))
		if err != nil {
			return moved, fmt.Errorf("redistest: CLUSTER GETKEYSINSLOT %d on %s: %w", m.Slot, m.From, err)
		}
		keys, _ := v.([]any)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", host, port, "", "0", migrateTimeout, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, fmt.Sprint(k))
		}
		if _, err := command(ctx, m.From, args...); err != nil {
			return moved, fmt.Errorf("redistest: MIGRATE of %d keys of slot %d from %s to %s: %w", len(keys), m.Slot, m.From, m.To, err)
		}
		moved += len(keys)
	}
	return moved, nil
}

// Finish moves the keys left, assigns the slot to To with CLUSTER SETSLOT
// NODE on To, From and then every other master, and returns once every
// node agrees and the cluster has settled (see Cluster.Settle).
func (m *Migration) Finish(ctx context.Context) error {
	if _, err := m.MoveKeys(ctx, 0); err != nil {
		return err
	}
	// To first: it bumps its config epoch, so its claim wins everywhere.
	if err := m.setSlot(ctx, m.To, "NODE", m.toID); err != nil {
		return err
	}
	if err := m.setSlot(ctx, m.From, "NODE", m.toID); err != nil {
		return err
	}
	shards, err := m.c.Shards(ctx)
	if err != nil {
		return err
	}
	for _, sh := range shards {
		if sh.Master == m.To || sh.Master == m.From {
			continue
		}
		if err := m.setSlot(ctx, sh.Master, "NODE", m.toID); err != nil {
			return err
		}
	}
	return m.c.settle(ctx, fmt.Sprintf("migrating slot %d to %s", m.Slot, m.To), func(view []nodeEntry) string {
		for _, sh := range shardsOf(view) {
			for _, r := range sh.Slots {
				if r.Contains(m.Slot) && sh.Master != m.To {
					return fmt.Sprintf("slot %d still on %s", m.Slot, sh.Master)
				}
			}
		}
		return ""
	})
}
