package tcpproxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().String()
}

// TestBlackholeHoldsAndResumes: a blackholed proxy keeps the connection
// open and forwards nothing; when it resumes, what was held arrives in
// order, and a connection opened during the blackhole works too.
func TestBlackholeHoldsAndResumes(t *testing.T) {
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echo := func(c net.Conn, msg string) {
		t.Helper()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo %q: got %q, %v", msg, got, err)
		}
	}
	echo(c, "before")

	p.Blackhole(true)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatalf("write into the blackhole: %v (the connection must stay open)", err)
	}
	late, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial during the blackhole: %v", err)
	}
	defer late.Close()
	// nothing comes back while the blackhole lasts (the deadline only
	// bounds this check; no answer can arrive at all)
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 16)); n != 0 || err == nil {
		t.Fatalf("read %d bytes through a blackholed proxy (%v)", n, err)
	}

	p.Blackhole(false)
	got := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte("held")) {
		t.Fatalf("after the blackhole: %q, %v; want the held bytes", got, err)
	}
	echo(c, "after")
	echo(late, "late")

	p.SetTarget("")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after SetTarget cut it")
	}
}
