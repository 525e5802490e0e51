package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/integration/dockerredis"
	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/internal/redistest"
)

// The servers every test in this package shares. Tests use unique lock names,
// so they do not interfere; the leak check at the end looks at all of them.
var (
	standalone *redistest.Server
	cluster    *redistest.Cluster
)

// TestMain runs a worker role when this binary was re-executed as one;
// otherwise it gets the servers from the harness, whose RunTests ends with a
// goleak check, after checkServersClean.
func TestMain(m *testing.M) {
	if role := childproc.Role(); role != "" {
		os.Exit(runChild(role))
	}
	// The suite's standalone Redis is a container when Docker answers, as
	// users often run it.
	dockerredis.Register()
	redistest.GoleakIgnores = append(redistest.GoleakIgnores, orphanedStubIgnores...)
	os.Exit(redistest.RunTests(m, "integration", true, func(e redistest.Env) {
		standalone, cluster = e.Standalone, e.Cluster
		fmt.Printf("integration: standalone Redis %s (%s), cluster %v\n", standalone.Addr, standalone.Kind, cluster.Addrs)
	}, func(redistest.Env) error { return checkServersClean() }))
}

// checkServersClean asserts what the suite must leave behind: no latchkey
// key and no subscribed latchkey channel, on any server. Fencing counters
// stay by design: a token must never go back.
func checkServersClean() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs := append([]string{standalone.Addr}, cluster.Addrs...)
	for _, addr := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			return err
		}
		var problems []string
		for _, cmd := range []rueidis.Completed{
			c.B().Keys().Pattern("latchkey:*").Build(),
			c.B().PubsubChannels().Pattern("latchkey:*").Build(),
			c.B().PubsubShardchannels().Pattern("latchkey:*").Build(),
		} {
			name := strings.Join(cmd.Commands(), " ")
			got, err := c.Do(ctx, cmd).AsStrSlice()
			got = slices.DeleteFunc(got, func(k string) bool { return isFenceCounter(k) || isLatchZero(ctx, c, k) })
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			} else if len(got) > 0 {
				problems = append(problems, fmt.Sprintf("%s: %v", name, got))
			}
		}
		c.Close()
		if len(problems) > 0 {
			return fmt.Errorf("%s left behind: %s", addr, strings.Join(problems, "; "))
		}
	}
	return nil
}

func isFenceCounter(key string) bool { return strings.HasSuffix(key, ":fence") }

// isLatchZero: key is a count-down latch at zero, which stays for its
// setter's retries (seconds) and then expires by itself.
func isLatchZero(ctx context.Context, c rueidis.Client, key string) bool {
	if !strings.HasSuffix(key, ":latch") {
		return false
	}
	count, err := c.Do(ctx, c.B().Hget().Key(key).Field("count").Build()).ToString()
	if err != nil || count != "0" {
		return false
	}
	ttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
	return err == nil && ttl > 0
}
