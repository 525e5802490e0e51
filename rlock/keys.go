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

// ValidateName returns the ErrInvalidName that a handle on the lock (or
// Election) called name would return, or nil, without a Client: for a
// program, such as the latchkey CLI, that checks its input before it
// connects. It is the rule of the latchkey protocol (see Client.Mutex);
// ProtocolRedisson also allows braces that form a hash tag.
func ValidateName(name string) error { return validateName(name, false) }

// ValidatePattern returns the ErrInvalidName that List would return for
// pattern, or nil: a pattern has no braces and is at most MaxNameLen bytes.
func ValidatePattern(pattern string) error {
	if len(pattern) > MaxNameLen || containsBrace(pattern) {
		return fmt.Errorf("%w: pattern %q must not contain braces (or be over %d bytes)", ErrInvalidName, pattern, MaxNameLen)
	}
	return nil
}
