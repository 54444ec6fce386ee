package caddyhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestValidTraceParent(t *testing.T) {
	const tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tests := []struct {
		in   string
		want bool
	}{
		{"00-" + tid + "-" + pid + "-01", true},
		{"00-" + tid + "-" + pid + "-00", true},
		{"01-" + tid + "-" + pid + "-01-future", true},
		{"01-" + tid + "-" + pid + "-01", true},
		{"00-" + tid + "-" + pid + "-01-extra", false}, // version 00 has exactly four fields
		{"01-" + tid + "-" + pid + "-01x", false},
		{"ff-" + tid + "-" + pid + "-01", false},
		{"00-" + strings.ToUpper(tid) + "-" + pid + "-01", false},
		{"00-" + strings.Repeat("0", 32) + "-" + pid + "-01", false},
		{"00-" + tid + "-" + strings.Repeat("0", 16) + "-01", false},
		{"00-" + tid + "-" + pid, false},
		{"00_" + tid + "-" + pid + "-01", false},
		{"0g-" + tid + "-" + pid + "-01", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := validTraceParent(tt.in); got != tt.want {
			t.Errorf("validTraceParent(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRequestTrace(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name   string
		header http.Header
		want   traceContext
	}{
		{"none", http.Header{}, traceContext{}},
		{"parent only", http.Header{"Traceparent": {parent}}, traceContext{parent: parent}},
		{"parent and state", http.Header{"Traceparent": {parent}, "Tracestate": {"a=1", "b=2"}}, traceContext{parent, "a=1,b=2"}},
		{"state without parent", http.Header{"Tracestate": {"a=1"}}, traceContext{}},
		{"two parents", http.Header{"Traceparent": {parent, parent}}, traceContext{}},
		{"malformed parent drops state", http.Header{"Traceparent": {"00-xyz"}, "Tracestate": {"a=1"}}, traceContext{}},
		{"long state dropped", http.Header{"Traceparent": {parent}, "Tracestate": {strings.Repeat("a", 513)}}, traceContext{parent: parent}},
		{"control character in state", http.Header{"Traceparent": {parent}, "Tracestate": {"a=1\x00"}}, traceContext{parent: parent}},
	}
	for _, tt := range tests {
		r := &http.Request{Header: tt.header}
		if got := requestTrace(r); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
		h := http.Header{}
		traceFrom(withTrace(context.Background(), tt.want)).setHeaders(h)
		if h.Get("Traceparent") != tt.want.parent || h.Get("Tracestate") != tt.want.state {
			t.Errorf("%s: headers %v", tt.name, h)
		}
	}
}
