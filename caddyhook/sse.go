package caddyhook

import (
	"encoding/json"
	"strconv"
	"time"
)

// What the live tails share (eventlog_admin.go, this node's; and
// cluster_view_tail.go, every node's): their timings and their messages.

// Live tail timings.
const (
	streamRowsEvery = time.Second      // rejection rows are sent at most this often
	streamKeepAlive = 15 * time.Second // a comment line keeps proxies from closing an idle stream
)

// sseMessage appends one Server-Sent Events message: its type, its id
// (the stream cursor; 0 = none) and v as one line of JSON.
func sseMessage(b []byte, typ string, id uint64, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		return b
	}
	b = append(b, "event: "...)
	b = append(b, typ...)
	if id != 0 {
		b = append(b, "\nid: "...)
		b = strconv.AppendUint(b, id, 10)
	}
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
