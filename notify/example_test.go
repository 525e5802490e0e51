package notify

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"
)

// A waiter subscribes, takes a mark, checks its condition, and waits for a
// message, bounded by how long it is willing to trust the channel.
func ExampleHub() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	hub := NewHub(rc, Options{})
	defer hub.Close()
	ctx := context.Background()

	sub, err := hub.Subscribe(ctx, "jobs:done") // confirmed by the server on return
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Release()
	mark := sub.Mark() // before checking the condition

	// Someone else announces the event.
	rc.Do(ctx, rc.B().Publish().Channel("jobs:done").Message("42").Build())

	wake, err := sub.Wait(ctx, mark, 10*time.Second)
	fmt.Println(wake, err)
	// Output: woken-one <nil>
}
