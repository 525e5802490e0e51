package watchdog_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/watchdog"
)

// A lease taken for 300ms outlives it as long as the watchdog keeps it, and
// the owner hears when it is lost.
func ExampleWatchdog() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{standaloneAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	w, err := watchdog.New(rc, watchdog.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()

	// A hash-owner lease, as latchkey's acquire script leaves it.
	sent := time.Now()
	rc.Do(ctx, rc.B().Hset().Key("example:{lease}").FieldValue().FieldValue("owner-1", "1").Build())
	rc.Do(ctx, rc.B().Pexpire().Key("example:{lease}").Milliseconds(300).Build())
	lost := make(chan error, 1)
	entry := w.Add("example:{lease}", "owner-1", sent, func(cause error) { lost <- cause })

	time.Sleep(time.Second) // three leases' worth
	n, _ := rc.Do(ctx, rc.B().Exists().Key("example:{lease}").Build()).AsInt64()
	fmt.Println("still there after 1s:", n == 1)

	rc.Do(ctx, rc.B().Del().Key("example:{lease}").Build()) // taken away behind the owner's back
	fmt.Println("owner told:", <-lost != nil)
	entry.Stop()
	// Output:
	// still there after 1s: true
	// owner told: true
}
