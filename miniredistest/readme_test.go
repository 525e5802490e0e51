package miniredistest

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsShowTheOptions: README.md and docs/testing.md tell users to build
// the rueidis client with the options newLocks uses, without which the
// tests here fail (TestUnsupported).
func TestDocsShowTheOptions(t *testing.T) {
	for _, doc := range []string{"../README.md", "../docs/testing.md"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := strings.Join(strings.Fields(string(b)), " ") // gofmt aligns the fields
		for _, opt := range []string{"ForceSingleClient: true", "AlwaysRESP2: true", "DisableCache: true", "miniredis.RunT(t)"} {
			require.Contains(t, text, opt, doc)
		}
	}
}
