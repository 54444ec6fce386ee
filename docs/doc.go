// Package docs holds the tests of the documentation (README.md and the
// pages beside this file): every link and anchor resolves, every page
// lists its sections, every Caddyfile adapts as written, and every request
// example gets the status the page shows from the config it names. How to
// mark an example: docs/testing.md, "The documentation's examples".
package docs
