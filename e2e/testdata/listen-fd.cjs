// Test harness preload for the real gateway (node --require): the gateway
// serves on the listening socket the harness hands it (inherited as the
// descriptor CADDYHOOK_E2E_LISTEN_FD) instead of binding its port itself.
//
// openclaw has no listen-on-fd or Unix-socket option and refuses --port 0,
// so without this the harness would have to guess a free port and hope
// nothing takes it before the gateway binds it. With it, the harness binds
// 127.0.0.1:0, keeps the socket for the whole test, and passes --port with
// that socket's port, so the gateway's own idea of its address is right.
//
// Only the first listen on 127.0.0.1 at that port is redirected; a listen
// on another host at that port (the ::1 loopback alias) gets an ephemeral
// port instead, so it can never collide with another program either.
"use strict";
const net = require("node:net");

const fd = Number(process.env.CADDYHOOK_E2E_LISTEN_FD);
const port = Number(process.env.CADDYHOOK_E2E_LISTEN_PORT);
if (Number.isInteger(fd) && fd > 2 && Number.isInteger(port) && port > 0) {
	const listen = net.Server.prototype.listen;
	let handedOver = false;
	net.Server.prototype.listen = function (...args) {
		const opts = typeof args[0] === "object" && args[0] !== null ? args[0] : null;
		const p = Number(opts ? opts.port : args[0]);
		const host = opts ? opts.host : typeof args[1] === "string" ? args[1] : undefined;
		if (p !== port) {
			return listen.apply(this, args);
		}
		const callbacks = args.filter((a) => typeof a === "function");
		if (!handedOver && host === "127.0.0.1") {
			handedOver = true;
			return listen.call(this, { fd }, ...callbacks);
		}
		return listen.call(this, { port: 0, host }, ...callbacks);
	};
}
