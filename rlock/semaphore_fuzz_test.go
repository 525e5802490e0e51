package rlock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzSemaphoreArgs: a Semaphore's name, size and permit count are checked
// before any I/O (the stub client panics on any): an invalid name is
// ErrInvalidName, a size below 1 or a count outside 1..size is
// ErrInvalidArgument, for every method; valid ones pass the checks, and
// all the semaphore's keys and its inbox share the name's Cluster slot.
func FuzzSemaphoreArgs(f *testing.F) {
	f.Add("pool", int64(3), int64(2), false)
	f.Add("pool", int64(3), int64(4), true)
	f.Add("a{b", int64(1), int64(1), false)
	f.Add("x", int64(0), int64(0), true)
	f.Add("x", int64(-1<<63), int64(1<<63-1), false)
	f.Fuzz(func(t *testing.T, name string, size, n int64, try bool) {
		c, err := NewClient(stubClient{}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := c.Semaphore(name, size)
		ctx := context.Background()
		validName := validateName(name, false) == nil
		var want error
		switch {
		case !validName:
			want = ErrInvalidName
		case size < 1 || n < 1 || n > size:
			want = ErrInvalidArgument
		}
		if want == nil {
			if _, err := s.c.checkCall(ctx, s.errFor(n), []LockOption{WithLease(time.Second)}, try); err != nil {
				t.Fatalf("%q size %d n %d: valid arguments rejected: %v", name, size, n, err)
			}
			checkSemKeys(t, s)
			return
		}
		var got error
		if try {
			var ok bool
			_, ok, got = s.TryAcquire(ctx, n)
			if ok {
				t.Fatal("TryAcquire granted on bad input")
			}
		} else {
			_, got = s.Acquire(ctx, n)
		}
		if !errors.Is(got, want) {
			t.Fatalf("%q size %d n %d: want %v, got %v", name, size, n, want, got)
		}
		if !validName || size < 1 {
			if _, err := s.Available(ctx); !errors.Is(err, want) {
				t.Fatalf("Available: want %v, got %v", want, err)
			}
			if err := s.Release(ctx); !errors.Is(err, want) {
				t.Fatalf("Release: want %v, got %v", want, err)
			}
		}
	})
}

func checkSemKeys(t *testing.T, s *Semaphore) {
	t.Helper()
	k := s.keys
	all := []string{k.Holders, k.Leases, k.Records, k.Queue, k.Wants, k.Inbox("client")}
	if len(slices.Compact(slices.Sorted(slices.Values(all)))) != len(all) {
		t.Fatalf("two of the semaphore's keys coincide: %q", all)
	}
	want := crc16(s.name) % clusterSlots
	for _, key := range all {
		if strings.Count(key, "{") != 1 || keySlot(key) != want {
			t.Fatalf("%q is not in the name's slot %d", key, want)
		}
	}
}
