package verify

const netlifyBody = `{"id":"5e1ea1f2c5a4b3d2e1f0a9b8","site_id":"1","state":"ready","name":"my-site","deploy_ssl_url":"https://my-site.netlify.app"}`

var _ = providerTest("netlify", providerTests{
	vectors: []vector{{
		name:   "deploy ready",
		source: "computed from https://docs.netlify.com/site-deploys/deploy-notifications/#payload-signature: a JWS HS256 with iss netlify and the body's hex SHA-256",
		cfg:    Config{Scheme: "netlify", Secrets: []string{genericSecret}},
		req: post(netlifyBody, "X-Webhook-Signature",
			hs256(genericSecret, `{"iss":"netlify","sha256":"`+sha256Hex(netlifyBody)+`"}`)),
		now:  testNow,
		want: Result{DeliveryID: "5e1ea1f2c5a4b3d2e1f0a9b8.ready", Event: "ready"},
	}},
})
