package verify

import (
	"crypto/ed25519"
	"encoding/hex"
	"testing"
)

// discordKey is a fixed test key pair.
var discordKey = ed25519.NewKeyFromSeed([]byte("discord-test-seed-0123456789abcd"))

const (
	discordCommand = `{"type":2,"id":"1181217712389247036","token":"aW50ZXJhY3Rpb246MTE4","data":{"name":"ask","options":[{"name":"q","value":"what is new?"}]},"member":{"user":{"username":"ann"}}}`
	discordPing    = `{"type":1,"id":"1","application_id":"2","token":"t","version":1}`
	discordEvPing  = `{"version":1,"application_id":"2","type":0}`
)

// discordSigned is a POST signed by key the Discord way.
func discordSigned(key ed25519.PrivateKey, body string) func() *Request {
	return post(body, "X-Signature-Timestamp", ts(0),
		"X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(key, []byte(ts(0)+body))))
}

var discordCfg = Config{Scheme: "discord", PublicKeys: []string{hex.EncodeToString(discordKey.Public().(ed25519.PublicKey))}}

var _ = providerTest("discord", providerTests{
	vectors: []vector{{
		name:   "slash command",
		source: "computed from https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers: hex Ed25519 signature of timestamp + body under a fixed key",
		cfg:    discordCfg,
		req:    discordSigned(discordKey, discordCommand),
		now:    testNow,
		want:   Result{DeliveryID: "1181217712389247036", Event: "ask"},
	}},
	handshakes: []handshakeCase{{
		name:   "PING",
		source: "computed from https://discord.com/developers/docs/interactions/receiving-and-responding#receiving-an-interaction: a signed PING is answered {\"type\":1}",
		req:    discordSigned(discordKey, discordPing),
		status: 200, ctype: "application/json", body: `{"type":1}`,
	}, {
		name:   "webhook events PING",
		source: "computed from https://discord.com/developers/docs/events/webhook-events#responding-to-a-ping-event: a signed type 0 is answered 204",
		req:    discordSigned(discordKey, discordEvPing),
		status: 204,
	}, {
		name:     "PING with a bad signature (Discord's own endpoint check)",
		req:      discordSigned(otherEd25519, discordPing),
		wantFail: ReasonBadSignature,
	}},
})

// TestDiscordAck: an accepted command is answered with a deferred response.
func TestDiscordAck(t *testing.T) {
	v := mustNew(t, discordCfg)
	res, err := v.VerifyRequest(discordSigned(discordKey, discordCommand)(), testNow)
	if err != nil || res.Ack == nil || string(res.Ack.Body) != `{"type":5}` {
		t.Fatalf("%+v, %v", res.Ack, err)
	}
	if _, err := New(Config{Scheme: "discord", PublicKeys: []string{pkixB64(otherP256.Public())}}); err == nil {
		t.Fatal("a P-256 key accepted for Discord")
	}
}
