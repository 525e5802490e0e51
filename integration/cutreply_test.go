package integration

import (
	"sync/atomic"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// cutOnReplyToxic closes a connection as the first reply comes down it, and
// drops that reply: the command ran on the server, the client never hears
// back and finds its connection gone.
//
// It stands in for toxiproxy's own reset_peer (timeout 0), which does the
// same but stops reading once it has closed: the toxic before it in the
// chain then blocks forever on the next chunk (a reply still in flight, a
// pub/sub message), and toxiproxy never rewires around a closed toxic, so a
// goroutine leaks with every connection cut that way (v2.12.0). This one
// keeps draining until the connection's input ends. It closes with a FIN
// rather than an RST, which the client handles the same way: a lost reply.
type cutOnReplyToxic struct{}

// cutOnReplyType is the toxic's registered type name.
const cutOnReplyType = "latchkey_cut_on_reply"

// connectionsCut counts the connections the toxic closed. Tests using it do
// not run in parallel; a test resets it at its start.
var connectionsCut atomic.Int64

func init() { toxics.Register(cutOnReplyType, new(cutOnReplyToxic)) }

// Pipe implements toxics.Toxic.
func (*cutOnReplyToxic) Pipe(stub *toxics.ToxicStub) {
	select {
	case <-stub.Interrupt:
		return
	case c := <-stub.Input:
		stub.Close()
		if c == nil {
			return
		}
		connectionsCut.Add(1)
	}
	// A closed stub is never interrupted again: drain until the link's
	// reader closes the input, so the toxic before this one never blocks.
	for range stub.Input {
	}
}
