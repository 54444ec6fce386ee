// Named export used by the "pr" mapping of mappings.json5.
export function opened(ctx) {
  if (ctx.payload.action !== "opened") return null;
  return { message: `PR #${ctx.payload.number} opened: ${ctx.payload.title}` };
}
