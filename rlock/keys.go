package rlock

import (
	"fmt"
	"strings"
)

// lockKeys builds the key and channel of one lock. Both start with
// "<prefix>:{<name>}", and since neither prefix nor name may hold a brace,
// Redis Cluster hashes both on exactly <name>: they share a slot, which the
// release script (it touches the key and publishes on the channel) requires.
func lockKeys(prefix, name string) (key, channel string, err error) {
	if err := validateName(name); err != nil {
		return "", "", err
	}
	key = prefix + ":{" + name + "}"
	return key, key + ":ch", nil
}

// fenceKey is the lock's fencing-token counter: in the lock's slot, since the
// acquire script increments it, and without expiry, so tokens never go back.
func fenceKey(key string) string { return key + ":fence" }

// queueKey is the lock's wait queue: the clients with waiters, oldest first,
// that releases wake one at a time (see internal/luascripts/wake.lua).
func queueKey(key string) string { return key + ":q" }

func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidName, len(name), MaxNameLen)
	case containsBrace(name):
		return fmt.Errorf("%w: %q contains a brace, which would change its Redis Cluster hash tag", ErrInvalidName, name)
	}
	return nil
}

func containsBrace(s string) bool { return strings.ContainsAny(s, "{}") }
