// Package web serves the chat page: plain HTML, CSS and JavaScript embedded in the binary, with
// no build step. The page logs in over the REST API, lists the user's conversations
// (GET /v1/im/conversations), friends and groups, and chats over the WebSocket gateway, all
// through the client SDK in sdk/ (an npm package whose ES modules the page imports as they are,
// served at /sdk/); the open conversation is the URL's hash, so a group's link can be shared.
// Handler answers with fixed content types and a Content-Security-Policy that lets the page load
// only its own files and connect only to its own origin.
package web
