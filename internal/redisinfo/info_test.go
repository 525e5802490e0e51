package redisinfo

import (
	"errors"
	"reflect"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const sample = "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500000\r\nused_cpu_sys_children:9.000000\r\n\r\n" +
	"# Commandstats\r\n" +
	"cmdstat_evalsha:calls=10,usec=34,usec_per_call=3.40,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_hincrby:calls=7,usec=5,usec_per_call=0.71,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_config|resetstat:calls=1,usec=5\r\n" +
	"cmdstat_client|setinfo:calls=4,usec=5\r\n" +
	"cmdstat_info:calls=3,usec=50\r\n"

func TestCPUSeconds(t *testing.T) {
	got, err := CPUSeconds(Parse(sample))
	if err != nil || got != 1.75 {
		t.Errorf("CPUSeconds = %v, %v; want 1.75 (children's CPU excluded)", got, err)
	}
	if _, err := CPUSeconds(Parse("used_cpu_sys:1\r\n")); !errors.Is(err, ErrMalformed) {
		t.Errorf("missing used_cpu_user: err = %v, want ErrMalformed", err)
	}
}

func TestCommandCalls(t *testing.T) {
	calls := CommandCalls(Parse(sample))
	want := map[string]int64{"evalsha": 10, "hincrby": 7, "config|resetstat": 1, "client|setinfo": 4, "info": 3}
	if !reflect.DeepEqual(calls, want) {
		t.Fatalf("CommandCalls = %v, want %v", calls, want)
	}
	if got := LockCommands(calls); got != 17 {
		t.Errorf("LockCommands = %d, want 17 (evalsha + hincrby)", got)
	}
}

func TestSum(t *testing.T) {
	calls := map[string]int64{"subscribe": 3, "ssubscribe": 4, "unsubscribe": 2, "sunsubscribe": 1, "psubscribe": 100, "evalsha": 50}
	if got := Sum(calls, SubscribeCommands); got != 7 {
		t.Errorf("Sum(SubscribeCommands) = %d, want 7 (subscribe + ssubscribe, not psubscribe)", got)
	}
	if got := Sum(calls, UnsubscribeCommands); got != 3 {
		t.Errorf("Sum(UnsubscribeCommands) = %d, want 3", got)
	}
	if got := Sum(nil, SubscribeCommands); got != 0 {
		t.Errorf("Sum of no calls = %d", got)
	}
}
