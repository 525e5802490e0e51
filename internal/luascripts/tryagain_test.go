package luascripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redistest"
)

// TestExecRetriesTryAgain: while a slot is half-migrated (MIGRATING on its
// master, IMPORTING on the new one, its keys moved), a script that declares
// a key that does not exist is refused with TRYAGAIN by the new master.
// Exec sends it again until the migration finishes, then it runs there; a
// ctx that ends first gets the TRYAGAIN error. The Cluster is the test's
// own: it moves a slot.
func TestExecRetriesTryAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := redistest.StartCluster(ctx, 3)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	present, missing := "{tryagain}:present", "{tryagain}:missing"
	require.NoError(t, c.Do(ctx, c.B().Set().Key(present).Value("1").Build()).Error())
	slot := redistest.SlotOf(present)
	_, to, err := cl.OtherMaster(ctx, slot)
	require.NoError(t, err)
	m, err := cl.BeginMigration(ctx, slot, to)
	require.NoError(t, err)
	moved, err := m.MoveKeys(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, moved)

	s := luascripts.New("tryagain-test", "return redis.call('exists', KEYS[1]) + redis.call('exists', KEYS[2])")
	keys := []string{present, missing}
	// What the server answers, without retries.
	err = c.Do(ctx, c.B().Eval().Script(s.Source()).Numkeys(2).Key(keys...).Build()).Error()
	require.True(t, luascripts.IsTryAgain(err), "a half-moved slot answers %v, want TRYAGAIN", err)
	// A ctx that ends during the migration gets that error.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	require.True(t, luascripts.IsTryAgain(s.Exec(short, c, keys, nil).Error()))

	done := make(chan rueidis.RedisResult, 1)
	go func() { done <- s.Exec(ctx, c, keys, nil) }()
	require.NoError(t, m.Finish(ctx))
	select {
	case r := <-done:
		n, err := r.AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the script ran once the migration finished")
	case <-time.After(waitFor):
		t.Fatal("Exec did not return after the migration finished")
	}
	require.NoError(t, c.Do(ctx, c.B().Del().Key(present).Build()).Error())
}
