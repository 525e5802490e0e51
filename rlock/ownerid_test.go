package rlock_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestClientIDs: owner ids start with the client id, which must be unique
// and unguessable: distinct between clients, with at least 128 bits (32 hex
// digits) written out. Across 64 ids, each of those digits must vary, apart
// from at most two fixed ones (a UUID's version and variant), which a
// counter, a timestamp or a short id would fail.
func TestClientIDs(t *testing.T) {
	const n = 64
	seen := make(map[string]bool, n)
	var digits [][]byte
	for range n {
		c, err := rlock.NewClient(&noIO{}, rlock.Options{})
		require.NoError(t, err)
		id := c.ID()
		require.NoError(t, c.Close())
		require.False(t, seen[id], "client id %q repeated", id)
		seen[id] = true
		raw, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
		require.NoError(t, err, "client id %q is not hex (dashes allowed)", id)
		require.GreaterOrEqual(t, len(raw), 16, "client id %q has fewer than 128 bits", id)
		digits = append(digits, []byte(hex.EncodeToString(raw)))
	}
	constant := 0
	for pos := range 32 {
		same := true
		for _, d := range digits[1:] {
			same = same && d[pos] == digits[0][pos]
		}
		if same {
			constant++
		}
	}
	require.LessOrEqual(t, constant, 2, "too many hex digits of the client id never change: %s ...", digits[0])
}
