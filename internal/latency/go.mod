module github.com/latchkey/latchkey/internal/latency

go 1.25.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	go.uber.org/goleak v1.3.0
)
