package rlock

import (
	"fmt"
	"strings"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// lockKeys validates name and builds the keys of its lock. Every key starts
// with "<prefix>:{<name>}", and neither may hold a brace, so all of them
// share the Cluster slot of <name>, as the scripts require.
func lockKeys(prefix, name string) (luascripts.Keys, error) {
	if err := validateName(name, false); err != nil {
		return luascripts.Keys{}, err
	}
	return luascripts.NewKeys(prefix + ":{" + name + "}"), nil
}

// rwKeys and semKeys are the keys of the RWMutex and the Semaphore that
// share a lock's name (and so its hash tag) with the Mutex whose keys are k.
func rwKeys(k luascripts.Keys) luascripts.RWKeys   { return luascripts.NewRWKeys(k.Lock + ":rw") }
func semKeys(k luascripts.Keys) luascripts.SemKeys { return luascripts.NewSemKeys(k.Lock + ":sem") }

// validateName checks a lock name; braces allows them (redissonName checks its hash tag).
func validateName(name string, braces bool) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidName, len(name), MaxNameLen)
	case !braces && containsBrace(name):
		return fmt.Errorf("%w: %q contains a brace, which would change its Redis Cluster hash tag", ErrInvalidName, name)
	}
	return nil
}

func containsBrace(s string) bool { return strings.ContainsAny(s, "{}") }
