// Command redis-image makes sure a Redis 7 image exists in the local Docker
// engine ("redis:7", or the image redistest builds from Debian's
// redis-server when no registry can be reached) and prints its tag. CI runs
// it once up front so that the first test package does not pay for the
// build; without a reachable Docker engine it says so and exits 0, since the
// harness then falls back to redis-server processes.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/latchkey/latchkey/integration/dockerredis"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if os.Getenv("LATCHKEY_NO_DOCKER") == "1" {
		fmt.Println("redis-image: LATCHKEY_NO_DOCKER=1, nothing to do")
		return
	}
	image, err := dockerredis.EnsureImage(ctx)
	if err != nil {
		fmt.Println("redis-image: no Docker image (tests will run redis-server processes):", err)
		return
	}
	fmt.Println("redis-image:", image)
}
