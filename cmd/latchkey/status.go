package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

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
	if !list {
		synopsis = "[--json] [--kind K] [flags] NAME"
	}
	fs := newFlags(sub, synopsis, env, std, &c)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	kind := string(rlock.KindMutex)
	if !list {
		fs.StringVar(&kind, "kind", kind, "the kind of lock NAME is: mutex (what run takes), rwmutex or semaphore")
	}
	if code := parse(fs, args, std); code >= 0 {
		return code
	}
	ops, known := kinds[rlock.Kind(kind)]
	switch {
	case !list && fs.NArg() != 1:
		return usageError(fs, "want one NAME, after the flags")
	case list && fs.NArg() > 1:
		return usageError(fs, "one PATTERN at most, after the flags")
	case !known:
		return usageError(fs, "--kind %q: want mutex, rwmutex or semaphore", kind)
	}
	check := rlock.ValidateName
	if list {
		check = rlock.ValidatePattern
	}
	if code := checkInput(std, check(fs.Arg(0))); code >= 0 {
		return code
	}
	return inspect(c, std, func(ctx context.Context, locks *rlock.Client) ([]rlock.LockInfo, error) {
		if list {
			return locks.List(ctx, fs.Arg(0))
		}
		info, err := ops.inspect(locks, ctx, fs.Arg(0))
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

// kinds are the operations on one lock of each kind that --kind chooses.
var kinds = map[rlock.Kind]struct {
	inspect     func(*rlock.Client, context.Context, string) (rlock.LockInfo, error)
	forceUnlock func(*rlock.Client, context.Context, string) (bool, error)
}{
	rlock.KindMutex:     {(*rlock.Client).Inspect, (*rlock.Client).ForceUnlock},
	rlock.KindRWMutex:   {(*rlock.Client).InspectRWMutex, (*rlock.Client).ForceUnlockRWMutex},
	rlock.KindSemaphore: {(*rlock.Client).InspectSemaphore, (*rlock.Client).ForceUnlockSemaphore},
}

// inspect connects, reads with read and prints with print.
func inspect(c common, std stdio, read func(context.Context, *rlock.Client) ([]rlock.LockInfo, error), print func([]rlock.LockInfo) error) int {
	locks, closeLocks, err := connect(c, rlock.Options{})
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
		return exitFor(err)
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	infos, err := read(ctx, locks)
	if err == nil {
		err = print(infos)
	}
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
		return exitFor(err)
	}
	return 0
}

// writeTable prints one line per holder, a line per waiter under it when
// waiters, "free" for a lock nobody holds, and what is damaged in a lock
// whose state is not all latchkey's.
func writeTable(w io.Writer, infos []rlock.LockInfo, waiters bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDER\tHOST\tPID\tHOLDS\tTOKEN\tHELD FOR\tLEASE LEFT\tWAITING")
	now := time.Now()
	for _, info := range infos {
		if !info.Held() {
			fmt.Fprintf(tw, "%s\t%s\t(free)\t\t\t\t\t\t\t%d\n", shown(info.Name), shown(string(info.Kind)), info.WaitersTotal)
		}
		for _, h := range info.Holders {
			held := "-"
			if !h.Since.IsZero() {
				held = now.Sub(h.Since).Round(time.Millisecond).String()
			}
			lease := "no expiry"
			if h.LeaseLeft >= 0 {
				lease = h.LeaseLeft.String()
			}
			token := "-"
			if h.Token > 0 {
				token = strconv.FormatInt(h.Token, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\n", shown(info.Name), shown(kindOf(info.Kind, h.Mode)), shown(who(h.Client, h.Owner)),
				shown(h.Client.Host), h.Client.PID, holds(h), token, held, lease, info.WaitersTotal)
		}
		if info.Damaged != "" {
			// A line of its own: the reason can be long, and must not be missed.
			fmt.Fprintf(tw, "  damaged:\t%s\n", info.Damaged)
		}
		if waiters {
			for i, q := range info.Waiters {
				what := ""
				switch {
				case q.Mode != "":
					what = "to " + q.Mode
				case q.Permits > 0:
					what = fmt.Sprintf("for %d permits", q.Permits)
				}
				waited := now.Sub(q.Since).Round(time.Millisecond).String()
				if !q.Woken.IsZero() {
					waited = "woken, window " + q.Woken.Sub(now).Round(time.Millisecond).String()
				}
				fmt.Fprintf(tw, "  waiting %d:\t%s\t%s\t%s\t%s\t\t\t%s\t\t\n", i+1, shown(what), shown(who(q.Client, "")), shown(q.Client.Host), pid(q.Client.PID), waited)
			}
		}
	}
	return tw.Flush()
}

// shown is s as the table prints it: as it is when every rune is
// printable, else quoted as a Go string (\n, \x1b, \u202e): names, client
// names and hosts come from Redis, which anyone with write access to it
// fills, and a newline would forge a row, an escape sequence reach the
// terminal. A leading quote is quoted too, so a quoted cell is unambiguous.
func shown(s string) string {
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// who names a client: by its ClientName, else its ID, else the owner id.
func who(c rlock.ClientInfo, owner string) string {
	switch {
	case c.Name != "":
		return c.Name
	case c.ID != "":
		return c.ID
	}
	return owner
}

func pid(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// kindOf is the table's KIND: an RWMutex hold's mode beside its kind.
func kindOf(k rlock.Kind, mode string) string {
	if mode != "" {
		return string(k) + "/" + mode
	}
	return string(k)
}

// holds is the table's HOLDS: the hold count, or a Semaphore's permits.
func holds(h rlock.Holder) string {
	if h.Permits > 0 {
		return strconv.FormatInt(h.Permits, 10) + " permits"
	}
	return strconv.FormatInt(h.Count, 10)
}

// lockOut is a lock in --json output.
type lockOut struct {
	Name         string      `json:"name"`
	Kind         rlock.Kind  `json:"kind"`
	Held         bool        `json:"held"`
	Holders      []holderOut `json:"holders"`
	LeaseLeftMS  int64       `json:"lease_left_ms"` // -1: no expiry
	Size         int64       `json:"size,omitempty"`
	Waiters      []waiterOut `json:"waiters"`
	WaitersTotal int         `json:"waiters_total"`
	ReservedFor  string      `json:"reserved_for,omitempty"`
	Damaged      string      `json:"damaged,omitempty"` // what is not latchkey's (rlock.LockInfo.Damaged)
}

type holderOut struct {
	Owner       string           `json:"owner"`
	Mode        string           `json:"mode,omitempty"`
	Count       int64            `json:"count"`
	Permits     int64            `json:"permits,omitempty"`
	Token       int64            `json:"token"`
	Since       time.Time        `json:"since"`
	LeaseLeftMS int64            `json:"lease_left_ms"` // -1: no expiry
	Client      rlock.ClientInfo `json:"client"`
}

type waiterOut struct {
	Client  rlock.ClientInfo `json:"client"`
	Since   time.Time        `json:"since"`          // zero once woken
	Woken   time.Time        `json:"woken,omitzero"` // a woken waiter's window end
	Mode    string           `json:"mode,omitempty"`
	Permits int64            `json:"permits,omitempty"`
}

func millis(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func lockJSON(info rlock.LockInfo) lockOut {
	out := lockOut{Name: info.Name, Kind: info.Kind, Held: info.Held(), Holders: []holderOut{}, Waiters: []waiterOut{},
		LeaseLeftMS: millis(info.LeaseLeft), Size: info.Size, WaitersTotal: info.WaitersTotal, ReservedFor: info.ReservedFor, Damaged: info.Damaged}
	for _, h := range info.Holders {
		out.Holders = append(out.Holders, holderOut{Owner: h.Owner, Mode: h.Mode, Count: h.Count, Permits: h.Permits, Token: h.Token,
			Since: h.Since, LeaseLeftMS: millis(h.LeaseLeft), Client: h.Client})
	}
	for _, q := range info.Waiters {
		out.Waiters = append(out.Waiters, waiterOut{Client: q.Client, Since: q.Since, Woken: q.Woken, Mode: q.Mode, Permits: q.Permits})
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
