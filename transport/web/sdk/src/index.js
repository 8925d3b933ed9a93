// imledger's client SDK: a Client for the WebSocket protocol (reconnect, catch-up by seq,
// resends by client_msg_id, dedupe) and a RestClient for the REST API. The same files run in
// browsers as ES modules and in Node; types come from their JSDoc (dist/types when packed).

export { Client, gatewayUrl } from './client.js';
export { Subscription } from './subscription.js';
export { UserChannel } from './userchannel.js';
export { RestClient } from './rest.js';
export { ImledgerError, ProtocolError, ConnectionLostError, ClientClosedError, ApiError } from './errors.js';
export { backoffDelay } from './backoff.js';
export { randomId, directTopic } from './ids.js';
export * from './types.js'; // the types (Message, SendAck, ClientEvents, ...): nothing at run time
