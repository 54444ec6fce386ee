package verify

const (
	eventgridBody       = `[{"id":"831e1650-001e-001b-66ab-eeb76e069631","eventType":"Microsoft.Storage.BlobCreated","subject":"/blobServices/default/containers/c/blobs/report.pdf","eventTime":"2017-06-26T18:41:00.9584103Z","data":{},"dataVersion":""}]`
	eventgridValidation = `[{"id":"2d1781af-3a4c-4d7c-bd0c-e34b19da4e66","topic":"/subscriptions/x","subject":"","data":{"validationCode":"512d38b6-c7b8-40c8-89fe-f46f9e9622b6","validationUrl":"https://rp-eastus2.eventgrid.azure.net/x"},"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","eventTime":"2018-01-25T22:12:19.4556811Z","metadataVersion":"1","dataVersion":"1"}]`
)

var _ = providerTest("eventgrid", providerTests{
	vectors: []vector{{
		name:   "BlobCreated",
		source: "computed from https://learn.microsoft.com/en-us/azure/event-grid/delivery-properties: a static Authorization delivery property",
		cfg:    Config{Scheme: "eventgrid", Secrets: []string{genericSecret}},
		req:    post(eventgridBody, "Authorization", "Bearer "+genericSecret, "aeg-event-type", "Notification"),
		now:    testNow,
		want:   Result{DeliveryID: "831e1650-001e-001b-66ab-eeb76e069631", Event: "Microsoft.Storage.BlobCreated", Payload: []byte(`{"events":` + eventgridBody + `}`)},
	}},
	handshakes: []handshakeCase{{
		name:   "subscription validation",
		source: "vector from https://learn.microsoft.com/en-us/azure/event-grid/end-point-validation",
		req:    post(eventgridValidation, "Authorization", "Bearer "+genericSecret, "aeg-event-type", "SubscriptionValidation"),
		status: 200, ctype: "application/json", body: `{"validationResponse":"512d38b6-c7b8-40c8-89fe-f46f9e9622b6"}`,
	}, {
		name:     "validation without the token",
		req:      post(eventgridValidation, "aeg-event-type", "SubscriptionValidation"),
		wantFail: ReasonMissingSignature,
	}},
	notes: "a token does not cover the body",
})
