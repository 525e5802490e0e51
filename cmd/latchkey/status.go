package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// inspectTimeout bounds status's and list's calls to Redis.
const inspectTimeout = 30 * time.Second

// status is `latchkey status NAME` (list false) and list is `latchkey list
// [PATTERN]` (list true): both print LockInfos, status always one.
func status(args, env []string, std stdio, list bool) int {
	var c common
	sub, synopsis := "status", "[--json] [flags] NAME"
	if list {
		sub, synopsis = "list", "[--json] [flags] [PATTERN]"
	}
	fs := newFlags(sub, synopsis, env, std, &c)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if code := parse(fs, args, std); code >= 0 {
		return code
	}
	switch {
	case !list && fs.NArg() != 1:
		return usageError(fs, "want one NAME, after the flags")
	case list && fs.NArg() > 1:
		return usageError(fs, "one PATTERN at most, after the flags")
	}
	return inspect(c, std, func(ctx context.Context, locks *rlock.Client) ([]rlock.LockInfo, error) {
		if list {
			return locks.List(ctx, fs.Arg(0))
		}
		info, err := locks.Inspect(ctx, fs.Arg(0))
		return []rlock.LockInfo{info}, err
	}, func(infos []rlock.LockInfo) error {
		if !*asJSON {
			return writeTable(std.out, infos, !list)
		}
		out := make([]lockOut, len(infos))
		for i, info := range infos {
			out[i] = lockJSON(info)
		}
		if !list {
			return writeJSON(std.out, out[0])
		}
		return writeJSON(std.out, out)
	})
}

// inspect connects, reads with read and prints with print.
func inspect(c common, std stdio, read func(context.Context, *rlock.Client) ([]rlock.LockInfo, error), print func([]rlock.LockInfo) error) int {
	locks, closeLocks, err := connect(c, rlock.Options{})
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %v\n", err)
		return exitError
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	infos, err := read(ctx, locks)
	if err == nil {
		err = print(infos)
	}
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %v\n", err)
		return exitError
	}
	return 0
}

// writeTable prints one line per holder, a line per waiter under it when
// waiters, and "free" for a lock nobody holds.
func writeTable(w io.Writer, infos []rlock.LockInfo, waiters bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOLDER\tHOST\tPID\tHOLDS\tTOKEN\tHELD FOR\tLEASE LEFT\tWAITING")
	now := time.Now()
	for _, info := range infos {
		if !info.Held() {
			fmt.Fprintf(tw, "%s\t(free)\t\t\t\t\t\t\t%d\n", info.Name, info.WaitersTotal)
		}
		for _, h := range info.Holders {
			who := h.Client.Name
			if who == "" {
				who = h.Client.ID
			}
			if who == "" {
				who = h.Owner
			}
			held := "-"
			if !h.Since.IsZero() {
				held = now.Sub(h.Since).Round(time.Millisecond).String()
			}
			lease := "no expiry"
			if info.LeaseLeft >= 0 {
				lease = info.LeaseLeft.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\n", info.Name, who, h.Client.Host, h.Client.PID, h.Count, h.Token, held, lease, info.WaitersTotal)
		}
		if waiters {
			for i, q := range info.Waiters {
				fmt.Fprintf(tw, "  waiting %d:\t%s\t\t\t\t\t%s\t\t\n", i+1, q.Client, now.Sub(q.Since).Round(time.Millisecond))
			}
		}
	}
	return tw.Flush()
}

// lockOut is a lock in --json output.
type lockOut struct {
	Name         string      `json:"name"`
	Held         bool        `json:"held"`
	Holders      []holderOut `json:"holders"`
	LeaseLeftMS  int64       `json:"lease_left_ms"` // -1: no expiry
	Waiters      []waiterOut `json:"waiters"`
	WaitersTotal int         `json:"waiters_total"`
	ReservedFor  string      `json:"reserved_for,omitempty"`
}

type holderOut struct {
	Owner  string           `json:"owner"`
	Count  int64            `json:"count"`
	Token  int64            `json:"token"`
	Since  time.Time        `json:"since"`
	Client rlock.ClientInfo `json:"client"`
}

type waiterOut struct {
	Client string    `json:"client"`
	Since  time.Time `json:"since"`
}

func lockJSON(info rlock.LockInfo) lockOut {
	out := lockOut{Name: info.Name, Held: info.Held(), Holders: []holderOut{}, Waiters: []waiterOut{},
		LeaseLeftMS: info.LeaseLeft.Milliseconds(), WaitersTotal: info.WaitersTotal, ReservedFor: info.ReservedFor}
	if info.LeaseLeft < 0 {
		out.LeaseLeftMS = -1
	}
	for _, h := range info.Holders {
		out.Holders = append(out.Holders, holderOut{Owner: h.Owner, Count: h.Count, Token: h.Token, Since: h.Since, Client: h.Client})
	}
	for _, q := range info.Waiters {
		out.Waiters = append(out.Waiters, waiterOut{Client: q.Client, Since: q.Since})
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
