package main

import (
	"slices"
	"testing"
)

// TestRunOrder: every repetition runs every run once, and the first run
// shifts by one from one repetition to the next, wrapping around.
func TestRunOrder(t *testing.T) {
	want := [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}}
	for rep, w := range want {
		if got := runOrder(3, rep); !slices.Equal(got, w) {
			t.Errorf("runOrder(3, %d) = %v, want %v", rep, got, w)
		}
	}
	if got := runOrder(1, 4); !slices.Equal(got, []int{0}) {
		t.Errorf("runOrder(1, 4) = %v, want [0]", got)
	}
	if got := runOrder(0, 2); len(got) != 0 {
		t.Errorf("runOrder(0, 2) = %v, want none", got)
	}
}
