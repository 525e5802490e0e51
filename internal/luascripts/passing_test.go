package luascripts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// TestPassingScriptWrapped: Passing knows the refusals Redis passes
// through in both forms a script's error takes: Redis 7 keeps the word
// first; Redis 6.2 wraps it in "ERR Error running script", where Passing
// saw only ERR, and a release sent to a demoted master was not retried.
// The replies come from a real Redis (redis.error_reply), as rueidis reads
// them.
func TestPassingScriptWrapped(t *testing.T) {
	c := standaloneClient(t)
	for msg, want := range map[string]bool{
		"READONLY You can't write against a read only replica. script: f, on @user_script:1.":                                                 true,
		"ERR Error running script (call to f_1b2c): @user_script:1: @user_script: 1: -READONLY You can't write against a read only replica. ": true,
		"ERR Error running script (call to f_1b2c): @user_script:1: @user_script: 1: -NOREPLICAS Not enough good replicas to write. ":         true,
		"ERR Error running script (call to f_1b2c): @user_script:1: @user_script: 1: -NOPERM this user has no permissions ":                   false,
		"ERR unknown command 'x'": false,
		"NOPERM this user has no permissions to run the 'eval' command": false,
	} {
		err := c.Do(t.Context(), c.B().Eval().Script("return redis.error_reply(ARGV[1])").Numkeys(0).Arg(msg).Build()).Error()
		assert.Error(t, err)
		assert.Equal(t, want, luascripts.Passing(err), msg)
	}
}
