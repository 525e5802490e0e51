package rlock_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// Two workers campaign for one election while a third party observes it.
// The first leads until it resigns; the second, queued meanwhile, takes
// over at once; when it resigns too, nobody leads. Observe reports each
// change as it is announced, without polling.
func ExampleElection() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	// Two Clients stand for two processes.
	a, _ := rlock.NewClient(rc, rlock.Options{ClientName: "worker-a"})
	defer a.Close()
	queued := make(chan struct{})
	var once sync.Once
	b, _ := rlock.NewClient(rc, rlock.Options{ClientName: "worker-b",
		OnWait: func(string) { once.Do(func() { close(queued) }) }})
	defer b.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	leaders := a.Election("scheduler").Observe(ctx)
	show := func(l rlock.Leadership) {
		if l == (rlock.Leadership{}) {
			fmt.Println("no leader")
			return
		}
		fmt.Printf("leader %s (client %s)\n", l.Value, l.Client.Name)
	}
	show(<-leaders)

	ea := a.Election("scheduler")
	actx, err := ea.Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	show(<-leaders)

	eb := b.Election("scheduler")
	won := make(chan context.Context)
	go func() {
		bctx, err := eb.Campaign(ctx, "10.0.0.2:8080") // blocks: a leads
		if err != nil {
			log.Fatal(err)
		}
		won <- bctx
	}()
	<-queued // b waits in the queue
	if err := ea.Resign(actx); err != nil {
		log.Fatal(err)
	}
	bctx := <-won
	show(<-leaders)
	if err := eb.Resign(bctx); err != nil {
		log.Fatal(err)
	}
	show(<-leaders)
	_, err = eb.Leader(ctx)
	fmt.Println(err)
	// Output:
	// no leader
	// leader 10.0.0.1:8080 (client worker-a)
	// leader 10.0.0.2:8080 (client worker-b)
	// no leader
	// latchkey: no leader in "scheduler"
}
