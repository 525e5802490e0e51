package luascripts

import (
	"context"
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
	Queue    []Queued         // oldest first, at most the number asked
	Queued   int64            // how many clients are queued in all
	Reserved string           // the client the free lock waits for, or ""
}

// Record is a parsed holder record (record.lua).
type Record struct {
	Owner string
	Token int64
	Since time.Time // when the grant was asked for, by the client's clock
	About string    // the holder's client description
}

// Queued is one client in a lock's wait queue.
type Queued struct {
	Client string
	Since  time.Time // when it queued, by the server's clock
}

// RunDescribe runs the describe script, returning at most maxQueue queued
// clients.
func RunDescribe(ctx context.Context, c rueidis.Client, k Keys, maxQueue int) (DescribeReply, error) {
	v, err := Describe.Exec(ctx, c, []string{k.Lock, k.Holder, k.Queue, k.Reservation}, []string{strconv.Itoa(maxQueue)}).ToArray()
	if err != nil {
		return DescribeReply{}, err
	}
	return ParseDescribe(v)
}

// ParseDescribe reads describe.lua's reply.
func ParseDescribe(v []rueidis.RedisMessage) (DescribeReply, error) {
	var r DescribeReply
	if len(v) != 6 {
		return r, fmt.Errorf("describe: %d values, want 6", len(v))
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
	if rec != "" {
		if r.Record, err = parseRecord(rec); err != nil {
			return r, err
		}
	}
	queue, err := v[3].AsStrSlice()
	if err != nil {
		return r, err
	}
	for i := 0; i+1 < len(queue); i += 2 {
		us, err := strconv.ParseFloat(queue[i+1], 64)
		if err != nil {
			return r, fmt.Errorf("describe: queue score %q: %w", queue[i+1], err)
		}
		r.Queue = append(r.Queue, Queued{Client: queue[i], Since: time.UnixMicro(int64(us))})
	}
	if r.Queued, err = v[4].AsInt64(); err != nil {
		return r, err
	}
	r.Reserved, err = v[5].ToString()
	return r, err
}

// parseRecord splits "<owner>|<token>|<ms>|<about>"; about may hold '|'.
func parseRecord(s string) (Record, error) {
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
