// Transform of the "dump" mapping: the run's message is what the gateway's
// mapping sees of the request (the path, the query and every header, names
// sorted), so that the differential compares what crossed the edge.
export default function (ctx) {
  const headers = {};
  for (const name of Object.keys(ctx.headers).sort()) headers[name] = ctx.headers[name];
  return {
    message: `Dump ${ctx.payload.nonce} path=${ctx.path} search=${ctx.url.search} headers=${JSON.stringify(headers)}`,
  };
}
