package integration

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressWaitErrorEscapes: a WaitError named the holder by the client
// name, host and owner id Redis had for it, as they were, so whoever can
// write to Redis could put escape sequences or a forged line in the error
// `latchkey run --wait` prints on stderr. They are quoted when not
// printable, as the CLI's tables quote them.
func TestRegressWaitErrorEscapes(t *testing.T) {
	const evil = "\x1b[31m\nx"
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		// What a grant's record says of the holder ("<owner>|<token>|<ms>|
		// <ClientInfo JSON>", record.lua), as anyone who can write may forge.
		esc := `\u001b[31m\nx`
		for holder, about := range map[string]string{
			"client name": "",
			"host":        `{"id":"i","host":"host` + esc + `","pid":1}`,
			"owner":       "{}",
		} {
			t.Run(holder, func(t *testing.T) {
				name := lockName(t)
				if about != "" {
					rc := redisClient(t, tp)
					key := rlock.DefaultPrefix + ":{" + name + "}"
					owner := "owner" + evil
					rec := owner + "|1|" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "|" + about
					require.NoError(t, rc.Do(ctx, rc.B().Hset().Key(key).FieldValue().FieldValue(owner, "1").FieldValue("#rec", rec).Build()).Error())
					require.NoError(t, rc.Do(ctx, rc.B().Pexpire().Key(key).Milliseconds(time.Minute.Milliseconds()).Build()).Error())
					defer func() { require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error()) }()
				} else {
					h := lockClient(t, tp, rlock.Options{ClientName: "client" + evil}).Mutex(name)
					hctx := mustLock(t, ctx, h)
					defer func() { require.NoError(t, h.Unlock(hctx)) }()
				}
				wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_, err := lockClient(t, tp, rlock.Options{}).Mutex(name).Lock(wctx)
				var we *rlock.WaitError
				require.True(t, errors.As(err, &we), "%T: %v", err, err)
				require.NotNil(t, we.Holder)
				msg := err.Error()
				require.False(t, strings.ContainsFunc(msg, unicode.IsControl), "control characters in %q", msg)
				require.Contains(t, msg, `\x1b[31m\nx`)
			})
		}
	})
}
