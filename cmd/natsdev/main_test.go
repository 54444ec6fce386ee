package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

func TestOptions(t *testing.T) {
	base := config{listen: "127.0.0.1:0", store: "s", name: "n", sync: "always", clusterName: "c"}
	with := func(f func(*config)) config { c := base; f(&c); return c }
	o, err := options(base)
	if err != nil || !o.SyncAlways || o.Port != server.RANDOM_PORT || o.Cluster.Port != 0 || o.HTTPPort != 0 {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	o, err = options(with(func(c *config) { c.sync = "2m" }))
	if err != nil || o.SyncAlways || o.SyncInterval.String() != "2m0s" {
		t.Fatalf("-sync 2m: %v %v %v", o.SyncAlways, o.SyncInterval, err)
	}
	o, err = options(with(func(c *config) {
		c.cluster, c.routes, c.noAdvertise, c.monitor = "127.0.0.1:0", "nats-route://127.0.0.1:1, nats-route://127.0.0.1:2", true, "localhost:0"
	}))
	if err != nil || len(o.Routes) != 2 || !o.Cluster.NoAdvertise || o.Cluster.Port != server.RANDOM_PORT || o.HTTPPort != server.RANDOM_PORT {
		t.Fatalf("cluster: %+v %v", o, err)
	}
	o, err = options(with(func(c *config) { c.user, c.password = "caddyhook", "0123456789abcdef0123" }))
	if err != nil || o.Username != "caddyhook" || o.Password != "0123456789abcdef0123" {
		t.Fatalf("-user: %q %v", o.Username, err)
	}
	if o, _ := options(base); o.Username != "" || o.Password != "" {
		t.Fatalf("without -user: user %q", o.Username)
	}
	for _, c := range []struct {
		cfg  config
		want string
	}{
		{with(func(c *config) { c.listen = "0.0.0.0:4222" }), "-listen: 0.0.0.0 is not a loopback address"},
		{with(func(c *config) { c.listen = "127.0.0.1:x" }), "-listen: port"},
		{with(func(c *config) { c.sync = "sometimes" }), "-sync"},
		{with(func(c *config) { c.sync = "-1s" }), "-sync"},
		{with(func(c *config) { c.cluster = "127.0.0.1:0" }), "-cluster needs -routes"},
		{with(func(c *config) { c.cluster, c.routes = "127.0.0.1:0", "nats://127.0.0.1:1" }), "-routes"},
		{with(func(c *config) { c.routes = "nats-route://127.0.0.1:1" }), "need -cluster"},
		{with(func(c *config) { c.monitor = "10.0.0.1:8222" }), "-monitor"},
		{with(func(c *config) { c.user = "caddyhook" }), "-user needs $NATS_PASSWORD"},
		{with(func(c *config) { c.user, c.password = "caddyhook", "short" }), "at least 16 characters"},
	} {
		if _, err := options(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.cfg, err, c.want)
		}
	}
}
