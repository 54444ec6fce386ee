package verify

import (
	"strings"
)

// MarkdownTable renders the providers as the README's table: one row per
// provider, sorted by name: the word after verify, the sender, how it
// authenticates, its handshake, where the delivery id and the event name
// are read, and what it posts. Generated from the registry (a test keeps
// the README's copy equal).
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| `verify` | Sender | Family | Authentication | Handshake | Delivery id | Event | Body |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range Providers() {
		hs := p.Handshake
		if hs == "" {
			hs = "—"
		}
		cells := []string{"`" + p.Name + "`", "[" + p.Title + "](" + p.Doc + ")", string(p.Family), p.Signature, hs, p.DeliveryID, p.Event, p.Body}
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + mdCell(c) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// mdCell escapes a table cell: pipes, angle brackets (not HTML), and
// newlines as spaces.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}
