// A small typed event emitter: the SDK's classes extend it with their event map.

/**
 * Emitter delivers events of a map of event names to payload types. A listener that throws does
 * not stop the others or the SDK: its error is rethrown on a later task, where it surfaces as an
 * uncaught error.
 *
 * @template {Record<string, any>} Events
 */
export class Emitter {
  constructor() {
    /** @type {Map<keyof Events, Set<(event: any) => void>>} */
    this._listeners = new Map();
  }

  /**
   * on registers listener for events of type and returns a function that removes it.
   *
   * @template {keyof Events} K
   * @param {K} type
   * @param {(event: Events[K]) => void} listener
   * @returns {() => void}
   */
  on(type, listener) {
    let set = this._listeners.get(type);
    if (!set) {
      set = new Set();
      this._listeners.set(type, set);
    }
    set.add(listener);
    return () => this.off(type, listener);
  }

  /**
   * once is on for the next event of type only.
   *
   * @template {keyof Events} K
   * @param {K} type
   * @param {(event: Events[K]) => void} listener
   * @returns {() => void}
   */
  once(type, listener) {
    /** @param {Events[K]} event */
    const wrapped = (event) => {
      this.off(type, wrapped);
      listener(event);
    };
    return this.on(type, wrapped);
  }

  /**
   * off removes listener.
   *
   * @template {keyof Events} K
   * @param {K} type
   * @param {(event: Events[K]) => void} listener
   */
  off(type, listener) {
    this._listeners.get(type)?.delete(listener);
  }

  /**
   * emit calls the listeners of type with event, in the order they were added.
   *
   * @protected
   * @template {keyof Events} K
   * @param {K} type
   * @param {Events[K]} event
   */
  emit(type, event) {
    const set = this._listeners.get(type);
    if (!set) {
      return;
    }
    for (const listener of Array.from(set)) {
      try {
        listener(event);
      } catch (err) {
        setTimeout(() => { throw err; }, 0);
      }
    }
  }
}
