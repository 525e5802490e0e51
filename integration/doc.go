// Package integration holds latchkey's end-to-end tests: real Redis and
// Redis Cluster started by package redistest, several processes contending
// for one lock, faults injected on the server side. It has no non-test code
// besides this file and the redistest harness.
package integration
