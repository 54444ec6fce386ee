// Transform of the "tx" mapping (export "shape"): rewrites the action,
// skips on request (null), throws on request, and tries wrong types.
export function shape(ctx) {
  const p = ctx.payload;
  if (p.skip) return null;
  if (p.boom) throw new Error("transform asked to fail");
  if (p.badTypes) return { deliver: "no", message: 42, name: "Typed" };
  return {
    message: `Transformed ${p.title} via ${ctx.path} q=${ctx.url.searchParams.get("q") ?? ""} (${p.nonce})`,
    name: "TX",
    sessionKey: `hook:tx:${p.nonce}`,
  };
}
