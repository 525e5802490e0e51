package luascripts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Described is a lock's state as its kind's describe script read it
// (describe.lua, rwdescribe.lua, semdescribe.lua): one shape for every
// kind, which the describe reply in inspect.lua documents.
type Described struct {
	Holds   []Held
	Queues  []QueueHead
	Size    int64    // a Semaphore's (0 when nobody holds or waits), else 0
	Woken   string   // a woken client whose wake window is open, or ""
	Damaged []string // what of the lock's state is not latchkey's; the rest was read
}

// Held is one hold.
type Held struct {
	Mode   string // an RWMutex's: "read" or "write"; else ""
	Owner  string
	Count  int64         // hold count; a Semaphore's: permits
	PTTL   time.Duration // its lease left (-1ms: no expiry), at most MaxPTTL
	Record Record        // zero when there is none or it is damaged
}

// Record is a parsed holder record (record.lua).
type Record struct {
	Owner string
	Token int64
	Since time.Time // when the grant was asked for, by the client's clock
	About string    // the holder's client description
}

// QueueHead is the oldest clients of a wait queue.
type QueueHead struct {
	Mode    string   // an RWMutex queue's: "read" or "write"; else ""
	Clients []Queued // oldest first, at most the number asked
	Total   int64    // how many clients are queued in all
}

// Queued is one client in a wait queue.
type Queued struct {
	Client string
	Since  time.Time // when it queued, by the server's clock; zero once woken
	Woken  time.Time // when its wake window ends (or ended), by the server's clock; zero if not woken
	About  string    // its description, "" when it recorded none
	Want   int64     // a Semaphore's: the permits it waits for; else 0
}

// Intro is one lock's introspection: its kind's describe and force-unlock
// scripts, which take the same KEYS, and the base of its channels.
type Intro struct {
	describe, forceUnlock *Script
	keys                  []string
	base                  string
	// observers is the Mutex's: the channel of the election of its name,
	// whose leader holds it; a force-unlock tells them. "" for other kinds.
	observers string
}

// Intro is the Mutex's (describe.lua, forceunlock.lua).
func (k Keys) Intro() Intro {
	return Intro{describe: Describe, forceUnlock: ForceUnlock, keys: []string{k.Lock, k.Queue}, base: k.Channel,
		observers: NewElectionKeys(k).Observers}
}

// Intro is the RWMutex's (rwdescribe.lua, rwforceunlock.lua).
func (k RWKeys) Intro() Intro {
	return Intro{describe: RWDescribe, forceUnlock: RWForceUnlock, keys: k.scripts(), base: k.Base}
}

// Intro is the Semaphore's (semdescribe.lua, semforceunlock.lua).
func (k SemKeys) Intro() Intro {
	return Intro{describe: SemDescribe, forceUnlock: SemForceUnlock, keys: k.all(), base: k.Base}
}

// Describe is the describe script and its call, returning at most
// maxQueue clients per queue; ParseDescribe reads its reply.
func (in Intro) Describe(maxQueue int) (*Script, Call) {
	return in.describe, Call{Keys: in.keys, Args: []string{strconv.Itoa(maxQueue)}}
}

// ForceUnlock runs the force-unlock script: whether it deleted a hold or a
// woken client's open window (dropping only windows that passed is not a
// force-unlock), or else the key it found that is not latchkey's, of
// another type or not of its lock's shape (force.lua's foreign; then it
// deleted nothing).
// A Mutex's also tells the observers of the election of its name.
func (in Intro) ForceUnlock(ctx context.Context, c rueidis.Client, w Wake) (deleted bool, foreign string, err error) {
	args := []string{in.base, w.spec()}
	if in.observers != "" {
		args = append(args, in.observers)
	}
	m, err := in.forceUnlock.Exec(ctx, c, in.keys, args).ToMessage()
	if err != nil {
		return false, "", err
	}
	if m.IsString() {
		foreign, err = m.ToString()
		return false, foreign, err
	}
	n, err := m.AsInt64()
	if err == nil && n != 0 && n != 1 {
		err = unexpected(in.forceUnlock.Name(), n)
	}
	return n == 1, "", err
}

// ParseDescribe reads the reply of any describe script: a reply of another
// shape is an error, values in it that are not latchkey's go to Damaged.
func ParseDescribe(v []rueidis.RedisMessage) (Described, error) {
	var d Described
	if len(v) != 4 {
		return d, unexpected("describe", fmt.Sprintf("%d values", len(v)))
	}
	holds, err := v[0].ToArray()
	if err != nil || len(holds)%5 != 0 {
		return d, unexpected("describe", fmt.Sprintf("holds %d values (%v)", len(holds), err))
	}
	for i := 0; i < len(holds); i += 5 {
		ms, err := holds[i+3].AsInt64()
		if err != nil {
			return d, unexpected("describe", err)
		}
		h := Held{Mode: str(holds[i]), Owner: str(holds[i+1]), PTTL: pttl(ms)}
		if h.Count, err = holds[i+2].AsInt64(); err != nil {
			d.Damaged = append(d.Damaged, fmt.Sprintf("the hold count of %q is %q, not an integer", h.Owner, str(holds[i+2])))
		}
		if h.Record, err = parseRecord(str(holds[i+4])); err != nil {
			d.Damaged = append(d.Damaged, err.Error())
		}
		d.Holds = append(d.Holds, h)
	}
	queues, err := v[1].ToArray()
	if err != nil {
		return d, unexpected("describe", err)
	}
	for _, m := range queues {
		q, err := parseQueueHead(m)
		if err != nil {
			return d, unexpected("describe", err)
		}
		d.Queues = append(d.Queues, q)
	}
	if d.Size, err = v[2].AsInt64(); err != nil {
		return d, unexpected("describe", err)
	}
	d.Woken = str(v[3])
	return d, nil
}

// str is m's string: "" for nil or anything else.
func str(m rueidis.RedisMessage) string {
	s, _ := m.ToString()
	return s
}

// parseQueueHead reads queue_head's {mode, {client, us, ...}, total,
// {about or false, ...}, {want, ...}}.
func parseQueueHead(m rueidis.RedisMessage) (QueueHead, error) {
	v, err := m.ToArray()
	if err != nil || len(v) != 5 {
		return QueueHead{}, fmt.Errorf("queue: %d values, want 5 (%v)", len(v), err)
	}
	q := QueueHead{Mode: str(v[0])}
	entries, err1 := v[1].AsStrSlice()
	abouts, err2 := v[3].ToArray()
	wants, err3 := v[4].AsIntSlice()
	q.Total, err = v[2].AsInt64()
	switch {
	case err != nil || err1 != nil || err2 != nil || err3 != nil:
		return q, fmt.Errorf("queue: %w", errors.Join(err, err1, err2, err3))
	case len(entries)%2 != 0 || len(abouts) != len(entries)/2 || (len(wants) != 0 && len(wants) != len(abouts)):
		return q, fmt.Errorf("queue: %d entries with %d descriptions and %d wants", len(entries), len(abouts), len(wants))
	}
	for i := 0; i < len(entries); i += 2 {
		score, err := strconv.ParseFloat(entries[i+1], 64)
		if err != nil {
			return q, fmt.Errorf("queue score %q: %w", entries[i+1], err)
		}
		// A woken client's score is minus its window's end, in ms (queue.lua).
		e := Queued{Client: entries[i], Since: time.UnixMicro(int64(score)), About: str(abouts[i/2])}
		if score < 0 {
			e.Since, e.Woken = time.Time{}, time.UnixMilli(int64(-score))
		}
		if len(wants) > 0 {
			e.Want = wants[i/2]
		}
		q.Clients = append(q.Clients, e)
	}
	return q, nil
}

// parseRecord splits "<owner>|<token>|<ms>|<about>"; about may hold '|'.
// "" is no record.
func parseRecord(s string) (Record, error) {
	if s == "" {
		return Record{}, nil
	}
	parts := strings.SplitN(s, "|", 4)
	if len(parts) == 4 {
		token, err1 := strconv.ParseInt(parts[1], 10, 64)
		ms, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 == nil && err2 == nil {
			return Record{Owner: parts[0], Token: token, Since: time.UnixMilli(ms), About: parts[3]}, nil
		}
	}
	return Record{}, fmt.Errorf("the holder record %q is not latchkey's (owner|token|ms|about)", s)
}
