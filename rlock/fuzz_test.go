package rlock

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/watchdog"
)

// The fuzz targets below check the validation done before any I/O. Their
// seed corpora are in testdata/fuzz; `go test` runs them, `make fuzz`
// explores further.

// FuzzLockKeys: a name is valid exactly when it is 1..MaxNameLen bytes
// without a brace. A valid name's keys and channels, the Mutex's and the
// RWMutex's, are distinct and have one {…}, holding the name verbatim, so
// Redis Cluster puts them all in the name's slot; an invalid one is
// ErrInvalidName. Nothing panics, whatever the prefix.
func FuzzLockKeys(f *testing.F) {
	f.Add("", "job")
	f.Add("app:locks", "a*")
	f.Fuzz(func(t *testing.T, prefix, name string) {
		opts, err := Options{Prefix: prefix}.withDefaults()
		if err != nil {
			if !errors.Is(err, ErrInvalidOptions) || !strings.ContainsAny(prefix, "{}") {
				t.Fatalf("prefix %q: %v", prefix, err)
			}
			return
		}
		keys, err := lockKeys(opts.Prefix, name)
		key, channel := keys.Lock, keys.Channel
		valid := len(name) >= 1 && len(name) <= MaxNameLen && !strings.ContainsAny(name, "{}")
		if !valid {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("name %q: want ErrInvalidName, got %v", name, err)
			}
			if key != "" || channel != "" {
				t.Fatalf("name %q rejected but got key %q, channel %q", name, key, channel)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid name %q rejected: %v", name, err)
		}
		want := crc16(name) % clusterSlots
		rw := (&Client{opts: opts}).RWMutex(name).keys
		all := []string{keys.Lock, keys.Channel, keys.Fence, keys.Queue, keys.Inbox("client"),
			rw.Write, rw.Readers, rw.ReadLeases, rw.ReadRecords, rw.QueueR, rw.QueueW, rw.Fence,
			rw.Inbox("client", false), rw.Inbox("client", true)}
		if len(slices.Compact(slices.Sorted(slices.Values(all)))) != len(all) {
			t.Fatalf("two of the lock's keys coincide: %q", all)
		}
		for _, s := range all {
			if !strings.HasPrefix(s, opts.Prefix+":") {
				t.Fatalf("%q does not start with the prefix %q", s, opts.Prefix)
			}
			if strings.Count(s, "{") != 1 || strings.Count(s, "}") != 1 {
				t.Fatalf("%q must have exactly one hash tag", s)
			}
			if tag := s[strings.IndexByte(s, '{')+1 : strings.IndexByte(s, '}')]; tag != name {
				t.Fatalf("hash tag of %q is %q, want the name %q", s, tag, name)
			}
			if got := keySlot(s); got != want {
				t.Fatalf("%q hashes to slot %d, want the name's slot %d", s, got, want)
			}
		}
	})
}

// FuzzOptions: Options either fail with ErrInvalidOptions or, with defaults
// filled in, keep every documented bound, and NewClient and Validate agree.
func FuzzOptions(f *testing.F) {
	f.Add("", int64(0), int64(0), 0, 0, int64(0), int64(0), int64(0))
	f.Add("app", int64(time.Second), int64(100*time.Millisecond), 10, 2, int64(time.Millisecond), int64(time.Second), int64(time.Second))
	f.Fuzz(func(t *testing.T, prefix string, timeout, interval int64, batch, mode int, spinMin, spinMax, release int64) {
		in := Options{
			Prefix: prefix, WatchdogTimeout: time.Duration(timeout), WatchdogInterval: time.Duration(interval),
			RenewBatchSize: batch, PubSub: PubSubMode(mode), SpinBackoffMin: time.Duration(spinMin),
			SpinBackoffMax: time.Duration(spinMax), ReleaseTimeout: time.Duration(release),
		}
		o, err := in.withDefaults()
		if err != nil {
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("%+v: untyped error %v", in, err)
			}
		} else {
			checkOptionBounds(t, in, o)
		}

		c, cerr := NewClient(stubClient{}, in)
		if verr := in.Validate(); (verr == nil) != (cerr == nil) {
			t.Fatalf("%+v: Validate says %v, NewClient %v", in, verr, cerr)
		}
		if cerr != nil {
			if !errors.Is(cerr, ErrInvalidOptions) {
				t.Fatalf("NewClient(%+v): untyped error %v", in, cerr)
			}
			return
		}
		defer c.Close()
		if err != nil {
			t.Fatalf("NewClient accepted %+v, which withDefaults rejects: %v", in, err)
		}
		wd := c.wd.Options()
		if wd.Timeout < time.Millisecond || wd.Timeout > MaxLease || wd.Interval <= 0 || wd.Interval >= wd.Timeout-watchdog.DriftMargin(wd.Timeout) || wd.BatchSize < 1 {
			t.Fatalf("NewClient(%+v) runs the watchdog with %+v", in, wd)
		}
	})
}

// checkOptionBounds asserts what Options' documentation promises of
// accepted options o, given the input in.
func checkOptionBounds(t *testing.T, in, o Options) {
	t.Helper()
	keptOr := func(field string, got, given, def time.Duration) {
		if (given == 0 && got != def) || (given != 0 && got != given) {
			t.Fatalf("%s: given %v, got %v (default %v)", field, given, got, def)
		}
	}
	keptOr("SpinBackoffMin", o.SpinBackoffMin, in.SpinBackoffMin, DefaultSpinBackoffMin)
	keptOr("SpinBackoffMax", o.SpinBackoffMax, in.SpinBackoffMax, DefaultSpinBackoffMax)
	keptOr("ReleaseTimeout", o.ReleaseTimeout, in.ReleaseTimeout, DefaultReleaseTimeout)
	switch {
	case o.Prefix == "" || strings.ContainsAny(o.Prefix, "{}") || (in.Prefix != "" && o.Prefix != in.Prefix):
		t.Fatalf("Prefix %q from %q", o.Prefix, in.Prefix)
	case o.WatchdogTimeout < 0 || o.WatchdogTimeout > MaxLease || o.WatchdogInterval < 0 || o.RenewBatchSize < 0:
		t.Fatalf("watchdog settings out of bounds: %+v", o)
	case o.SpinBackoffMin <= 0 || o.SpinBackoffMax < o.SpinBackoffMin || o.SpinBackoffMax > MaxLease:
		t.Fatalf("spin backoff out of bounds: %v..%v", o.SpinBackoffMin, o.SpinBackoffMax)
	case o.ReleaseTimeout <= 0:
		t.Fatalf("ReleaseTimeout %v", o.ReleaseTimeout)
	case o.PubSub < PubSubAuto || o.PubSub > PubSubSharded:
		t.Fatalf("PubSub %d", o.PubSub)
	}
}

// FuzzLockOptions: LockOptions either fail with ErrInvalidArgument or give a
// lease within 1ms..MaxLease (when set) and a wait >= 0 that only TryLock has.
func FuzzLockOptions(f *testing.F) {
	f.Add(int64(time.Second), true, int64(0), false, false, false)
	f.Add(int64(0), false, int64(-1), true, true, true)
	f.Fuzz(func(t *testing.T, lease int64, withLease bool, wait int64, withWait, try, withNil bool) {
		var opts []LockOption
		if withNil {
			opts = append(opts, nil)
		}
		if withLease {
			opts = append(opts, WithLease(time.Duration(lease)))
		}
		if withWait {
			opts = append(opts, WithWait(time.Duration(wait)))
		}
		o, err := buildLockOptions(opts, try)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		switch {
		case o.leaseSet != withLease || o.hasWait != withWait:
			t.Fatalf("options lost: %+v", o)
		case o.leaseSet && (o.lease < time.Millisecond || o.lease > MaxLease):
			t.Fatalf("lease %v accepted", o.lease)
		case o.wait < 0:
			t.Fatalf("negative wait %v accepted", o.wait)
		case o.hasWait && !try:
			t.Fatal("WithWait accepted for Lock")
		}
	})
}

// stubClient is enough of a rueidis client for NewClient, which does no I/O.
type stubClient struct{ rueidis.Client }

func (stubClient) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// keySlot is the Redis Cluster slot of key: CRC16 of the hash tag (what is
// between the first '{' and the next '}', when not empty), else of the key.
func keySlot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return crc16(key) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// TestKeySlot pins the test's slot function to the Redis Cluster
// specification's reference values, so the fuzz target checks the real thing.
func TestKeySlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, the specification says 0x31C3", got)
	}
	for key, want := range map[string]uint16{
		"foo":               12182, // CLUSTER KEYSLOT foo
		"{user1000}.a":      crc16("user1000") % clusterSlots,
		"foo{}{bar}":        crc16("foo{}{bar}") % clusterSlots, // empty tag: the whole key
		"foo{{bar}}zap":     crc16("{bar") % clusterSlots,
		"latchkey:{a}":      crc16("a") % clusterSlots,
		"latchkey:{a}:ch":   crc16("a") % clusterSlots,
		"x{a\x00b}y":        crc16("a\x00b") % clusterSlots,
		"prefix:{\xff\xfe}": crc16("\xff\xfe") % clusterSlots,
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
