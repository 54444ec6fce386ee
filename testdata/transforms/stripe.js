// Stripe transform: a failed invoice payment wakes the agent now; every
// other event type is skipped.

const currencyOf = (invoice) => String(invoice.currency ?? "").toUpperCase();

export function transform({ payload }) {
  if (payload.type !== "invoice.payment_failed") return null;
  const invoice = payload.data?.object ?? {};
  const amount = (invoice.amount_due ?? 0) / 100;
  return {
    kind: "wake",
    text: `Stripe: payment failed for ${invoice.customer_email} (${amount} ${currencyOf(invoice)}) invoice ${invoice.id}`,
    mode: "now",
  };
}
