// Package web serves the demo chat page: plain HTML, CSS and JavaScript embedded in the binary,
// with no build step. The page logs in over the REST API, then chats over the WebSocket gateway.
// Handler answers with fixed content types and a Content-Security-Policy that lets the page load
// only its own files and connect only to its own origin.
package web
