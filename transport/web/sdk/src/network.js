// The browser's online and offline events.

/**
 * watchNetwork calls online and offline on the browser's events of those names and returns the
 * function that stops; where there are no such events (Node), it does nothing.
 *
 * @param {() => void} online
 * @param {() => void} offline
 * @returns {() => void}
 */
export function watchNetwork(online, offline) {
  const target = globalThis;
  if (typeof target.addEventListener !== 'function' || typeof target.removeEventListener !== 'function') {
    return () => {};
  }
  target.addEventListener('online', online);
  target.addEventListener('offline', offline);
  return () => {
    target.removeEventListener('online', online);
    target.removeEventListener('offline', offline);
  };
}
