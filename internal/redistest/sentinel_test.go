package redistest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

func TestSentinel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := time.Now()
	s, err := StartSentinel(ctx, 2, 3)
	require.NoError(t, err)
	t.Logf("StartSentinel(2, 3) took %s", time.Since(start))
	defer s.Close()
	require.Len(t, s.SentinelAddrs, 3)
	require.Len(t, s.ReplicaAddrs, 2)
	master, err := s.Master(ctx)
	require.NoError(t, err)
	require.Equal(t, s.MasterAddr, master)
	for _, r := range s.ReplicaAddrs {
		v, err := command(ctx, r, "ROLE")
		require.NoError(t, err)
		require.Equal(t, "slave", v.([]any)[0])
	}

	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  s.SentinelAddrs,
		Sentinel:     rueidis.SentinelOption{MasterSet: s.MasterName},
		DisableCache: true,
	})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Do(ctx, c.B().Set().Key("before").Value("1").Build()).Error())
	v, err := rawGet(ctx, s.MasterAddr, "before")
	require.NoError(t, err)
	require.Equal(t, "1", v, "the Sentinel client writes to the master")

	// writesTo checks the client's writes land on master, retrying while
	// the client follows the switch.
	writesTo := func(t *testing.T, master, key string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			val := fmt.Sprint(i)
			err := c.Do(ctx, c.B().Set().Key(key).Value(val).Build()).Error()
			if err == nil {
				if v, _ := rawGet(ctx, master, key); v == val {
					return
				}
			}
			require.True(t, time.Now().Before(deadline), "the Sentinel client does not write to %s (last error %v)", master, err)
			time.Sleep(100 * time.Millisecond)
		}
	}

	t.Run("Failover", func(t *testing.T) {
		old, err := s.Master(ctx)
		require.NoError(t, err)
		start := time.Now()
		promoted, err := s.Failover(ctx)
		require.NoError(t, err)
		t.Logf("Failover (SENTINEL FAILOVER to every Sentinel agreeing) took %s", time.Since(start))
		require.NotEqual(t, old, promoted)
		require.Contains(t, s.ReplicaAddrs, promoted)
		for _, addr := range s.SentinelAddrs {
			got, err := sentinelMasterAddr(ctx, addr, s.MasterName)
			require.NoError(t, err)
			require.Equal(t, promoted, got, "Sentinel %s", addr)
		}
		writesTo(t, promoted, "after-failover")

		start = time.Now()
		require.NoError(t, s.Settle(ctx))
		t.Logf("Settle (the old master turned into a replica) took %s more", time.Since(start))
		v, err := command(ctx, old, "ROLE")
		require.NoError(t, err)
		require.Equal(t, "slave", v.([]any)[0])
	})

	t.Run("KillMaster", func(t *testing.T) {
		old, err := s.Master(ctx)
		require.NoError(t, err)
		start := time.Now()
		promoted, err := s.KillMaster(ctx)
		require.NoError(t, err)
		t.Logf("KillMaster (kill -9 to every Sentinel agreeing) took %s", time.Since(start))
		require.NotEqual(t, old, promoted)
		_, err = command(ctx, old, "PING")
		require.Error(t, err, "the killed master stays dead")
		writesTo(t, promoted, "after-kill")
		v, err := rawGet(ctx, promoted, "before")
		require.NoError(t, err)
		require.Equal(t, "1", v)
	})

	pids := make([]int, 0)
	for _, p := range slices.Concat(s.data, s.sentinels) {
		pids = append(pids, p.cmd.Process.Pid)
	}
	c.Close()
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close must be idempotent")
	for _, pid := range pids {
		requireProcessGone(t, pid)
	}
	require.Empty(t, redisChildren(t))
}

func TestSentinelRejectsBadSize(t *testing.T) {
	_, err := StartSentinel(context.Background(), 2, 0)
	require.Error(t, err)
}
