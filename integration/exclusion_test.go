package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/rlock"
)

// exclusionParams tell an "exclusion" worker process, this test binary
// re-executed, what to do.
type exclusionParams struct {
	Addrs                    []string // the Redis or Cluster
	Spin                     bool     // SpinMutex rather than Mutex
	Lock, Counter, Barrier   string
	Goroutines, Acquisitions int
}

const (
	exclusionProcs        = 4
	exclusionGoroutines   = 8
	exclusionAcquisitions = 500
)

// TestExclusion is the lock's reason to exist: 4 processes × 8 goroutines
// each do 500 unprotected read-modify-write cycles (GET, +1, SET) of one
// Redis counter under the lock. Any overlap of two critical sections loses an
// increment, so the counter must end exactly at 16000.
func TestExclusion(t *testing.T) {
	cases := []struct {
		name string
		tp   topology
		spin bool
	}{
		{"standalone/pubsub", topologies()[0], false},
		{"standalone/spin", topologies()[0], true},
		{"cluster/pubsub", topologies()[1], false},
		{"cluster/spin", topologies()[1], true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := redisClient(t, tc.tp)
			ctx := context.Background()
			name := lockName(t)
			counter, barrier := "test:{"+name+"}:counter", "test:{"+name+"}:barrier"
			t.Cleanup(func() {
				rc.Do(ctx, rc.B().Del().Key(counter).Build())
				rc.Do(ctx, rc.B().Del().Key(barrier+":ready").Build())
				rc.Do(ctx, rc.B().Del().Key(barrier+":go").Build())
			})

			params := exclusionParams{Addrs: tc.tp.addrs, Spin: tc.spin, Lock: name, Counter: counter, Barrier: barrier,
				Goroutines: exclusionGoroutines, Acquisitions: exclusionAcquisitions}
			var workers []*childproc.Proc
			for p := 0; p < exclusionProcs; p++ {
				workers = append(workers, startChild(t, "exclusion", fmt.Sprintf("exclusion worker %d", p), params, ""))
			}
			// Start every worker at once, so they contend from the first
			// acquisition: each reports ready, then waits for "go".
			for p := 0; p < exclusionProcs; p++ {
				_, err := rc.Do(ctx, rc.B().Blpop().Key(barrier+":ready").Timeout(60).Build()).AsStrSlice()
				require.NoError(t, err, "worker %d never got ready", p)
			}
			start := time.Now()
			for p := 0; p < exclusionProcs; p++ {
				require.NoError(t, rc.Do(ctx, rc.B().Rpush().Key(barrier+":go").Element("1").Build()).Error())
			}
			for _, w := range workers {
				if err := w.Wait(); err != nil {
					t.Error(err)
				}
			}
			elapsed := time.Since(start)
			got, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
			require.NoError(t, err)
			want := int64(exclusionProcs * exclusionGoroutines * exclusionAcquisitions)
			require.Equal(t, want, got, "lost increments mean two holders overlapped")
			t.Logf("%d acquisitions by %d processes × %d goroutines in %v (%.0f/s)", want, exclusionProcs, exclusionGoroutines,
				elapsed.Round(time.Millisecond), float64(want)/elapsed.Seconds())
		})
	}
}

// runChild is a worker process's main; it returns the exit code.
func runChild(role string) int {
	work := map[string]func() error{"exclusion": exclusionWorker, "holder": holderChild, "famholder": famHolderChild, "elector": electorChild}[role]
	if work == nil {
		fmt.Fprintln(os.Stderr, "unknown child role", role)
		return 2
	}
	if err := work(); err != nil {
		fmt.Fprintf(os.Stderr, "%s worker: %v\n", role, err)
		return 1
	}
	return 0
}

func exclusionWorker() error {
	var p exclusionParams
	if err := childproc.Params(&p); err != nil {
		return err
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: p.Addrs, DisableCache: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	c, err := rlock.NewClient(rc, rlock.Options{})
	if err != nil {
		return err
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := rc.Do(ctx, rc.B().Rpush().Key(p.Barrier+":ready").Element("1").Build()).Error(); err != nil {
		return err
	}
	if err := rc.Do(ctx, rc.B().Blpop().Key(p.Barrier+":go").Timeout(60).Build()).Error(); err != nil {
		return fmt.Errorf("waiting at the barrier: %w", err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, p.Goroutines)
	for g := 0; g < p.Goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex(p.Lock)
			if p.Spin {
				m = c.SpinMutex(p.Lock)
			}
			for i := 0; i < p.Acquisitions; i++ {
				if err := increment(ctx, rc, m, p.Counter); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(func() (all []error) {
		for err := range errs {
			all = append(all, err)
		}
		return
	}()...)
}

// increment is the deliberately unsafe read-modify-write that only the lock
// makes correct.
func increment(ctx context.Context, rc rueidis.Client, m *rlock.Mutex, counter string) error {
	lctx, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	n, err := rc.Do(lctx, rc.B().Get().Key(counter).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		n, err = 0, nil
	}
	if err == nil {
		err = rc.Do(lctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(n+1, 10)).Build()).Error()
	}
	if uerr := m.Unlock(lctx); err == nil {
		err = uerr
	}
	return err
}
