// Transform of the "undef" mapping: returns undefined, which the gateway
// reads as "no override" (the template-built action is dispatched).
export default function (ctx) {
  void ctx;
  return undefined;
}
