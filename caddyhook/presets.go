package caddyhook

import (
	"fmt"
	"slices"
	"strings"
)

// Gmail push batches carry up to about 100 messages; the reference bounds
// the gmail path at min(32 MiB, 100 × (3 × 20,000 + 8,192)) bytes.
const gmailMaxBody = 100 * (3*20000 + 8192)

// presetMappings returns the built-in mappings for the named presets, in
// the order given; they are matched after the configured mappings. In
// forward mode only their ids, paths and body limits are used.
func presetMappings(names []string) ([]Mapping, error) {
	var out []Mapping
	for _, n := range names {
		switch strings.ToLower(strings.TrimSpace(n)) {
		case "gmail":
			out = append(out, gmailPreset())
		default:
			return nil, fmt.Errorf("presets: unknown preset %q (known: gmail)", n)
		}
	}
	return slices.Clip(out), nil
}

// gmailPreset is the reference gateway's Gmail push mapping: one agent
// run per message of the batch.
func gmailPreset() Mapping {
	return Mapping{
		ID:         "gmail",
		MatchPath:  "gmail",
		Action:     "agent",
		WakeMode:   modeNow,
		Name:       "Gmail",
		ForEach:    "messages",
		SessionKey: "hook:gmail:{{messages[0].id}}",
		MessageTemplate: "New email from {{messages[0].from}}\nSubject: {{messages[0].subject}}\n" +
			"{{messages[0].snippet}}\n{{messages[0].body}}",
		MaxBody: gmailMaxBody,
	}
}
