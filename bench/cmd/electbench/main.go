// Command electbench measures leader turnover: the time from the leader's
// resignation (or its process' crash) to the next leader's Campaign
// returning, for latchkey's Election and for the fixed-lease polling
// election people write by hand (followers loop SET NX PX every -poll; the
// leader renews its key every lease/3 and deletes it to resign).
//
//	electbench [-addr host:port] [-rounds 15] [-crashes 5] [-lease 1s] [-poll 100ms]
//
// Each round has a leader and two followers on clients of their own, both
// campaigning before the leader goes. A crash stops the leader's renewals
// (latchkey: its Client is closed, which releases nothing) at a random
// point of its renewal period. Without -addr it starts redis-server on
// 127.0.0.1.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/rlock"
)

type config struct {
	rounds, crashes int
	lease, poll     time.Duration
	addr            string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "", "a Redis on loopback to use (default: start redis-server)")
	flag.IntVar(&cfg.rounds, "rounds", 15, "resignations per election kind")
	flag.IntVar(&cfg.crashes, "crashes", 5, "crashes per election kind")
	flag.DurationVar(&cfg.lease, "lease", time.Second, "the leader's lease (latchkey: WatchdogTimeout)")
	flag.DurationVar(&cfg.poll, "poll", 100*time.Millisecond, "the polling election's retry period")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "electbench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	ctx := context.Background()
	addr, about, stop, err := benchredis.Get(ctx, cfg.addr)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("electbench: %s; lease %v, poll %v; 1 leader + 2 followers per round\n\n", about, cfg.lease, cfg.poll)
	fmt.Println("| election | leader goes by | rounds | median | min–max |")
	fmt.Println("|---|---|---|---|---|")
	for _, kind := range []struct {
		name string
		new  func(rc rueidis.Client, name string) elector
	}{
		{"latchkey Election", func(rc rueidis.Client, name string) elector { return newLatchkey(rc, name, cfg.lease) }},
		{fmt.Sprintf("polling SET NX PX every %v", cfg.poll), func(rc rueidis.Client, name string) elector {
			return &polling{rc: rc, key: "electbench:{" + name + "}", lease: cfg.lease, poll: cfg.poll}
		}},
	} {
		for _, way := range []struct {
			name  string
			crash bool
			n     int
		}{{"resignation", false, cfg.rounds}, {"crash", true, cfg.crashes}} {
			var took []time.Duration
			for i := range way.n {
				d, err := round(ctx, addr, fmt.Sprintf("%s-%v-%d-%d", kind.name, way.crash, i, time.Now().UnixNano()), kind.new, way.crash, cfg.lease)
				if err != nil {
					return err
				}
				took = append(took, d)
			}
			slices.Sort(took)
			fmt.Printf("| %s | %s | %d | %v | %v–%v |\n", kind.name, way.name, len(took), ms(took[len(took)/2]), ms(took[0]), ms(took[len(took)-1]))
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// elector is one campaigner of one election kind, on a client of its own.
type elector interface {
	campaign(ctx context.Context, waiting func()) error // blocks until it leads; waiting is called once it has been refused
	resign() error
	crash() // stop renewing, release nothing
	close()
}

// round: a leader, two followers waiting, then the leader goes; the time
// until the first follower leads.
func round(ctx context.Context, addr, name string, newElector func(rueidis.Client, string) elector, crash bool, lease time.Duration) (time.Duration, error) {
	var els []elector
	for range 3 {
		rc, err := benchredis.Connect(addr)
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		e := newElector(rc, name)
		defer e.close()
		els = append(els, e)
	}
	if err := els[0].campaign(ctx, func() {}); err != nil {
		return 0, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var refused sync.WaitGroup
	won := make(chan time.Time, 2)
	for _, e := range els[1:] {
		refused.Add(1)
		var once sync.Once
		go func() {
			if e.campaign(cctx, func() { once.Do(refused.Done) }) == nil {
				won <- time.Now()
			}
		}()
	}
	refused.Wait()
	var gone time.Time
	if crash {
		// At a random point of the renewal period, as a real crash.
		time.Sleep(rand.N(lease / 3))
		gone = time.Now()
		els[0].crash()
	} else {
		gone = time.Now()
		if err := els[0].resign(); err != nil {
			return 0, err
		}
	}
	select {
	case at := <-won:
		return at.Sub(gone), nil
	case <-time.After(10 * lease):
		return 0, fmt.Errorf("%s: no new leader within %v", name, 10*lease)
	}
}

// latchkey is a campaigner of an rlock.Election.
type latchkey struct {
	locks   *rlock.Client
	e       *rlock.Election
	waiting atomic.Pointer[func()]
	mu      sync.Mutex
	lctx    context.Context
	closed  bool
}

func newLatchkey(rc rueidis.Client, name string, lease time.Duration) *latchkey {
	l := &latchkey{}
	locks, err := rlock.NewClient(rc, rlock.Options{WatchdogTimeout: lease, OnWait: func(string) {
		if f := l.waiting.Load(); f != nil {
			(*f)()
		}
	}})
	if err != nil {
		panic(err) // the options are valid
	}
	l.locks, l.e = locks, locks.Election(name)
	return l
}

func (l *latchkey) campaign(ctx context.Context, waiting func()) error {
	l.waiting.Store(&waiting)
	lctx, err := l.e.Campaign(ctx, "bench")
	l.mu.Lock()
	l.lctx = lctx
	l.mu.Unlock()
	return err
}

func (l *latchkey) resign() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.e.Resign(l.lctx)
}

// crash closes the Client without resigning: its watchdog stops, and the
// lock stays until its lease ends, as when the process dies.
func (l *latchkey) crash() { l.shut(false) }

func (l *latchkey) close() { l.shut(true) }

func (l *latchkey) shut(resign bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		if resign && l.lctx != nil && l.lctx.Err() == nil {
			_ = l.e.Resign(l.lctx) // a follower that won: let go before closing
		}
		_ = l.locks.Close()
	}
}

// polling is the hand-written election: SET NX PX until it succeeds, a
// renewal every lease/3 that checks the value first, DEL to resign.
type polling struct {
	rc          rueidis.Client
	key, id     string
	lease, poll time.Duration
	stop        context.CancelFunc
	done        chan struct{}
}

var (
	renewScript  = rueidis.NewLuaScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`)
	releaseLua   = rueidis.NewLuaScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)
	pollerSerial atomic.Int64
)

func (p *polling) campaign(ctx context.Context, waiting func()) error {
	p.id = fmt.Sprint(pollerSerial.Add(1))
	for {
		err := p.rc.Do(ctx, p.rc.B().Set().Key(p.key).Value(p.id).Nx().PxMilliseconds(p.lease.Milliseconds()).Build()).Error()
		if err == nil {
			break
		}
		if !rueidis.IsRedisNil(err) {
			return err
		}
		waiting()
		select {
		case <-time.After(p.poll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rctx, stop := context.WithCancel(context.Background())
	p.stop, p.done = stop, make(chan struct{})
	go func() {
		defer close(p.done)
		tick := time.NewTicker(p.lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-tick.C:
				renewScript.Exec(rctx, p.rc, []string{p.key}, []string{p.id, fmt.Sprint(p.lease.Milliseconds())})
			}
		}
	}()
	return nil
}

func (p *polling) crash() {
	if p.stop != nil {
		p.stop()
		<-p.done
		p.stop = nil
	}
}

func (p *polling) resign() error {
	p.crash()
	return releaseLua.Exec(context.Background(), p.rc, []string{p.key}, []string{p.id}).Error()
}

func (p *polling) close() {
	if p.stop != nil {
		_ = p.resign()
	}
}
