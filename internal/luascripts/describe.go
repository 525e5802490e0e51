package luascripts

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// DescribeReply is a Mutex's state as describe.lua read it.
type DescribeReply struct {
	PTTL     int64            // the lock's: -2 no lock, -1 no expiry
	Counts   map[string]int64 // owner id -> hold count
	Record   Record           // zero when there is none
	Queue    QueueHead
	Reserved string // the client the free lock waits for, or ""
}

// Record is a parsed holder record (record.lua).
type Record struct {
	Owner string
	Token int64
	Since time.Time // when the grant was asked for, by the client's clock
	About string    // the holder's client description
}

// QueueHead is the oldest clients of a wait queue (queue.lua's queue_head).
type QueueHead struct {
	Clients []Queued // oldest first, at most the number asked
	Total   int64    // how many clients are queued in all
}

// Queued is one client in a wait queue.
type Queued struct {
	Client string
	Since  time.Time // when it queued, by the server's clock
	About  string    // its description, "" when it recorded none
	Want   int64     // a Semaphore's: the permits it waits for
}

// Held is one hold of an RWMutex or a Semaphore.
type Held struct {
	Owner  string
	Count  int64 // hold count; a Semaphore's: permits
	PTTL   int64 // its lease left, ms (-1: no expiry)
	Record Record
}

// RWDescribeReply is an RWMutex's state as rwdescribe.lua read it.
type RWDescribeReply struct {
	Writer  []Held // the write hold: none or one
	Readers []Held // the live read holds
	QueueR  QueueHead
	QueueW  QueueHead
}

// SemDescribeReply is a Semaphore's state as semdescribe.lua read it.
type SemDescribeReply struct {
	Holders []Held    // the live holders
	Size    int64     // 0 when nobody holds or waits
	Queue   QueueHead // each with its Want
}

func describeKeys(k Keys) []string {
	return []string{k.Lock, k.Holder, k.Queue, k.Reservation, k.QueueDesc}
}

// DescribeCall is the describe script's call for k, returning at most
// maxQueue queued clients.
func DescribeCall(k Keys, maxQueue int) Call {
	return Call{Keys: describeKeys(k), Args: []string{strconv.Itoa(maxQueue)}}
}

// RWDescribeCall is rwdescribe's call for k.
func RWDescribeCall(k RWKeys, maxQueue int) Call {
	return Call{Keys: k.scripts(), Args: []string{strconv.Itoa(maxQueue)}}
}

// SemDescribeCall is semdescribe's call for k.
func SemDescribeCall(k SemKeys, maxQueue int) Call {
	return Call{Keys: k.all(), Args: []string{strconv.Itoa(maxQueue)}}
}

// ParseDescribe reads describe.lua's reply.
func ParseDescribe(v []rueidis.RedisMessage) (DescribeReply, error) {
	var r DescribeReply
	if len(v) != 5 {
		return r, fmt.Errorf("describe: %d values, want 5", len(v))
	}
	var err error
	if r.PTTL, err = v[0].AsInt64(); err != nil {
		return r, err
	}
	if r.Counts, err = v[1].AsIntMap(); err != nil {
		return r, err
	}
	rec, err := v[2].ToString()
	if err != nil {
		return r, err
	}
	if r.Record, err = parseRecord(rec); err != nil {
		return r, err
	}
	if r.Queue, err = parseQueueHead(v[3]); err != nil {
		return r, err
	}
	r.Reserved, err = v[4].ToString()
	return r, err
}

// ParseRWDescribe reads rwdescribe.lua's reply.
func ParseRWDescribe(v []rueidis.RedisMessage) (RWDescribeReply, error) {
	var r RWDescribeReply
	if len(v) != 4 {
		return r, fmt.Errorf("rwdescribe: %d values, want 4", len(v))
	}
	holds, err := parseHolds(v[0])
	if err != nil {
		return r, err
	}
	writers, err := v[1].AsInt64()
	if err != nil || writers < 0 || writers > int64(len(holds)) {
		return r, fmt.Errorf("rwdescribe: %d writers of %d holds: %v", writers, len(holds), err)
	}
	r.Writer, r.Readers = holds[:writers], holds[writers:]
	if r.QueueR, err = parseQueueHead(v[2]); err != nil {
		return r, err
	}
	r.QueueW, err = parseQueueHead(v[3])
	return r, err
}

// ParseSemDescribe reads semdescribe.lua's reply.
func ParseSemDescribe(v []rueidis.RedisMessage) (SemDescribeReply, error) {
	var r SemDescribeReply
	if len(v) != 4 {
		return r, fmt.Errorf("semdescribe: %d values, want 4", len(v))
	}
	var err error
	if r.Holders, err = parseHolds(v[0]); err != nil {
		return r, err
	}
	if r.Size, err = v[1].AsInt64(); err != nil {
		return r, err
	}
	if r.Queue, err = parseQueueHead(v[2]); err != nil {
		return r, err
	}
	wants, err := v[3].ToArray()
	if err != nil || len(wants) != len(r.Queue.Clients) {
		return r, fmt.Errorf("semdescribe: %d wants for %d queued clients: %v", len(wants), len(r.Queue.Clients), err)
	}
	for i, w := range wants {
		r.Queue.Clients[i].Want = 1 // what the scripts assume of a client that recorded none
		if !w.IsNil() {
			if r.Queue.Clients[i].Want, err = w.AsInt64(); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// parseHolds reads {owner, count, pttl, record, ...}.
func parseHolds(m rueidis.RedisMessage) ([]Held, error) {
	v, err := m.ToArray()
	if err != nil {
		return nil, err
	}
	if len(v)%4 != 0 {
		return nil, fmt.Errorf("describe: %d values of holds, want fours", len(v))
	}
	var out []Held
	for i := 0; i < len(v); i += 4 {
		var h Held
		var rec string
		var errs [4]error
		h.Owner, errs[0] = v[i].ToString()
		h.Count, errs[1] = v[i+1].AsInt64()
		h.PTTL, errs[2] = v[i+2].AsInt64()
		rec, errs[3] = v[i+3].ToString()
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("describe: hold %d: %w", i/4, err)
			}
		}
		if h.Record, err = parseRecord(rec); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// parseQueueHead reads queue_head's {{client, us, ...}, total, {about or
// nil, ...}}.
func parseQueueHead(m rueidis.RedisMessage) (QueueHead, error) {
	var q QueueHead
	v, err := m.ToArray()
	if err != nil {
		return q, err
	}
	if len(v) != 3 {
		return q, fmt.Errorf("describe: queue: %d values, want 3", len(v))
	}
	entries, err := v[0].AsStrSlice()
	if err != nil {
		return q, err
	}
	if q.Total, err = v[1].AsInt64(); err != nil {
		return q, err
	}
	abouts, err := v[2].ToArray()
	if err != nil {
		return q, err
	}
	if len(entries)%2 != 0 || len(abouts) != len(entries)/2 {
		return q, fmt.Errorf("describe: queue: %d entries with %d descriptions", len(entries), len(abouts))
	}
	for i := 0; i < len(entries); i += 2 {
		us, err := strconv.ParseFloat(entries[i+1], 64)
		if err != nil {
			return q, fmt.Errorf("describe: queue score %q: %w", entries[i+1], err)
		}
		about, _ := abouts[i/2].ToString() // nil: a client that recorded none
		q.Clients = append(q.Clients, Queued{Client: entries[i], Since: time.UnixMicro(int64(us)), About: about})
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
	if len(parts) != 4 {
		return Record{}, fmt.Errorf("describe: holder record %q is not owner|token|ms|about", s)
	}
	token, err1 := strconv.ParseInt(parts[1], 10, 64)
	ms, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Record{}, fmt.Errorf("describe: holder record %q is not owner|token|ms|about", s)
	}
	return Record{Owner: parts[0], Token: token, Since: time.UnixMilli(ms), About: parts[3]}, nil
}
