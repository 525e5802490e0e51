package rlock

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// FuzzLatchArguments: a latch's name is checked as a lock's is, before any
// I/O (the stub client panics on I/O), and a count below 1 is
// ErrInvalidArgument. A valid name's key and channel hold exactly one hash
// tag, the name, and differ from every key of the lock of that name.
func FuzzLatchArguments(f *testing.F) {
	f.Add("job", int64(3))
	f.Add("a{b", int64(1))
	f.Add("", int64(0))
	f.Add("x", int64(-1))
	f.Fuzz(func(t *testing.T, name string, n int64) {
		c, err := NewClient(stubClient{}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l := c.CountDownLatch(name)
		if l.Name() != name {
			t.Fatalf("Name() = %q, want %q", l.Name(), name)
		}
		valid := len(name) >= 1 && len(name) <= MaxNameLen && !strings.ContainsAny(name, "{}")
		ctx := context.Background()
		if !valid {
			for _, err := range []error{l.CountDown(ctx), l.Await(ctx)} {
				if !errors.Is(err, ErrInvalidName) {
					t.Fatalf("name %q: want ErrInvalidName, got %v", name, err)
				}
			}
			if _, err := l.TrySetCount(ctx, n); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("name %q: TrySetCount: want ErrInvalidName, got %v", name, err)
			}
			return
		}
		if n <= 0 {
			if _, err := l.TrySetCount(ctx, n); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("count %d: want ErrInvalidArgument, got %v", n, err)
			}
		}
		lock, err := lockKeys(c.opts.Prefix, name)
		if err != nil {
			t.Fatalf("valid name %q rejected: %v", name, err)
		}
		want := crc16(name) % clusterSlots
		for _, s := range []string{l.keys.Latch, l.keys.Channel} {
			if strings.Count(s, "{") != 1 || strings.Count(s, "}") != 1 {
				t.Fatalf("%q must have exactly one hash tag", s)
			}
			if got := keySlot(s); got != want {
				t.Fatalf("%q hashes to slot %d, want the name's slot %d", s, got, want)
			}
			for _, k := range []string{lock.Lock, lock.Channel, lock.Fence, lock.Queue, lock.Inbox(c.id)} {
				if s == k {
					t.Fatalf("latch key %q is also a key of the lock %q", s, name)
				}
			}
		}
		if l.keys.Latch == l.keys.Channel {
			t.Fatalf("latch key and channel coincide: %q", l.keys.Latch)
		}
	})
}
