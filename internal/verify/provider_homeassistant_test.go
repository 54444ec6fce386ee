package verify

const homeassistantBody = `{"id":"01HF2K","event":"door_opened","message":"Front door opened while away"}`

var _ = providerTest("homeassistant", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://www.home-assistant.io/integrations/rest_command/: the token is sent as Authorization: Bearer",
		cfg:    Config{Scheme: "homeassistant", Secrets: []string{genericSecret}},
		req:    post(homeassistantBody, "Authorization", "Bearer "+genericSecret),
		now:    testNow,
		want:   Result{DeliveryID: "01HF2K", Event: "door_opened"},
	}},
	notes: "a token does not cover the body",
})
